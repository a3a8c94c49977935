"""uvicorn with the service's protocol closes a connection whose request headers are too slow: a client
that connects and sends nothing, or sends its headers a byte at a time, held a connection for as long as
it liked (found by fuzzing: 300 held at once). A prompt request, and a kept-alive connection between
requests (uvicorn's own timeout), are unaffected."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from tests.uvicorn_served import served
from trustscore.cli.http_protocol import MAX_HEADER_BYTES, OneWriteHttpToolsProtocol

TIMEOUT = 0.4


class QuickProtocol(OneWriteHttpToolsProtocol):
    header_timeout = TIMEOUT


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


@pytest.fixture
async def port() -> AsyncIterator[int]:
    async with served(app, QuickProtocol, lifespan="off", timeout_keep_alive=5) as port:
        yield port


async def answers(reader: asyncio.StreamReader, n: int) -> None:
    """Read until ``n`` answers 200 OK have come (each within 10 s)."""
    got = b""
    while got.count(b"200 OK") < n:
        chunk = await asyncio.wait_for(reader.read(4096), 10)
        assert chunk, got
        got += chunk


async def closed_within(reader: asyncio.StreamReader, seconds: float) -> bool:
    try:
        return await asyncio.wait_for(reader.read(), seconds) == b""
    except ConnectionResetError:  # closed with the client's bytes unread
        return True
    except TimeoutError:
        return False


async def test_a_connection_that_sends_nothing_is_closed(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    assert await closed_within(reader, TIMEOUT * 5)
    writer.close()


async def test_headers_sent_too_slowly_close_the_connection(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n")
    for _ in range(int(TIMEOUT * 10)):  # one more header line every 0.1 s: never the end of them
        await asyncio.sleep(0.1)
        if writer.is_closing():
            break
        writer.write(b"X-Slow: 1\r\n")
    assert await closed_within(reader, TIMEOUT * 5)
    writer.close()


async def test_prompt_requests_on_a_kept_alive_connection_are_answered(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    for _ in range(2):
        writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
        assert head.startswith(b"HTTP/1.1 200") and await reader.readexactly(2) == b"ok"
        await asyncio.sleep(TIMEOUT * 2)  # idle between requests longer than the header timeout
    writer.close()


@pytest.mark.parametrize("more", [b"\r\n", b"\r\n" * 3])
async def test_blank_lines_after_a_request_do_not_hold_the_connection(port: int, more: bytes) -> None:
    """(Review.) Blank lines between requests begin no request, and they stopped uvicorn's keep-alive wait:
    the connection stayed open for good."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
    await asyncio.wait_for(reader.readuntil(b"ok"), 5)
    for _ in range(int(TIMEOUT * 10)):
        if writer.is_closing():
            break
        writer.write(more)
        await asyncio.sleep(0.1)
    assert await closed_within(reader, TIMEOUT * 5)
    writer.close()


async def test_headers_over_the_size_bound_close_the_connection(port: int) -> None:
    """(Review.) httptools sets no bound: a 64 MB header was read, in 8 s of CPU."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * (MAX_HEADER_BYTES + 1))
    assert await closed_within(reader, TIMEOUT / 2)  # at once, not at the timeout


async def test_a_body_read_with_its_headers_is_not_counted_as_headers(port: int) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    body = b"b" * (MAX_HEADER_BYTES * 2)
    writer.write(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 5)
    assert head.startswith(b"HTTP/1.1 200") and await reader.readexactly(2) == b"ok"
    writer.close()


async def early_or_slow(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """A POST answered 401 without reading its body; a GET answered after 2.5 header timeouts."""
    if scope["type"] != "http":
        return
    if scope["method"] == "GET":
        await asyncio.sleep(TIMEOUT * 2.5)
    status = 401 if scope["method"] == "POST" else 200
    await send({"type": "http.response.start", "status": status, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"no" if status == 401 else b"ok"})


async def test_an_upload_answered_before_it_is_read_gets_its_answer() -> None:
    """(Review.) The rest of the body arrived after the answer and was counted as the next request's
    headers: past the bound the connection was closed with data unread, and the client got a reset
    instead of the answer (a 413 or 401 to a plain upload)."""
    async with served(early_or_slow, QuickProtocol, lifespan="off") as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        body = b"b" * (4 * MAX_HEADER_BYTES)
        writer.write(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n" % len(body) + body)
        await writer.drain()
        assert (await asyncio.wait_for(reader.readuntil(b"no"), 5)).startswith(b"HTTP/1.1 401")
        writer.close()


async def test_pipelined_requests_behind_slow_answers_are_all_answered() -> None:
    """(Review.) The third request's clock ran while the first two were answered (reading paused):
    the connection closed and both answers were lost. The reviewer's reproducer failed on the old code;
    this test, its closest form here, passes there too: it guards the behaviour, it did not find it."""
    get = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
    async with served(early_or_slow, QuickProtocol, lifespan="off") as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(get + get + get[:19])
        await writer.drain()
        await asyncio.sleep(0.05)
        writer.write(get[19:])
        await answers(reader, 3)
        writer.close()


async def test_a_pipelined_requests_headers_are_bounded_while_the_answer_before_it_is_made() -> None:
    """(Review.) Size was counted only while the clock ran, and a pipelined request's clock starts when
    the answer before it ends: 16 MiB of one header were read meanwhile. (The bound is checked after each
    read, and the read in which the request before ended is not counted: up to one read more passes.)"""
    async with served(early_or_slow, QuickProtocol, lifespan="off") as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(
            b"GET / HTTP/1.1\r\nHost: x\r\n\r\nGET / HTTP/1.1\r\nX-Big: " + b"a" * (16 * MAX_HEADER_BYTES)
        )
        assert await closed_within(reader, TIMEOUT)  # the first answer takes 2.5 timeouts: closed before
        writer.close()


async def test_a_connection_idle_after_the_rest_of_an_early_answered_body_is_closed() -> None:
    """(Review.) The body's last bytes ended uvicorn's keep-alive wait and nothing started another."""
    async with served(early_or_slow, QuickProtocol, lifespan="off", timeout_keep_alive=5) as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\n\r\n")
        assert (await asyncio.wait_for(reader.readuntil(b"no"), 5)).startswith(b"HTTP/1.1 401")
        writer.write(b"b")
        assert await closed_within(reader, TIMEOUT * 5)
        writer.close()


async def test_trailers_are_bounded_as_headers_and_dropped() -> None:
    """(Review.) Trailer fields after a chunked body were appended to the request's headers with no
    bound: 1 GB from one connection in 3 s. They are dropped (the app sees none) and counted."""
    seen: list[list[tuple[bytes, bytes]]] = []

    async def reading(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        while (await receive()).get("more_body"):
            pass
        seen.append(list(scope["headers"]))
        await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
        await send({"type": "http.response.body", "body": b"ok"})

    async with served(reading, QuickProtocol, lifespan="off") as port:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        head = b"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nhi\r\n0\r\n"
        writer.write(head + b"X-Trailer: 1\r\n\r\n")
        assert (await asyncio.wait_for(reader.readuntil(b"ok"), 5)).startswith(b"HTTP/1.1 200")
        assert not any(name == b"x-trailer" for name, _ in seen[-1])
        writer.write(head + b"".join(b"X-T%d: %s\r\n" % (n, b"a" * 1000) for n in range(100)))
        assert await closed_within(reader, TIMEOUT / 2)  # past the bound: at once
        writer.close()

        # A long body and a 30 KB trailer, split inside the trailers, then a pipelined GET: all served.
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        chunks = b"".join(b"3e8\r\n%s\r\n" % (b"a" * 1000) for _ in range(100))
        writer.write(head.replace(b"2\r\nhi\r\n0\r\n", chunks) + b"0\r\nChecksum: a")
        await asyncio.sleep(0.05)
        writer.write(b"bc\r\nX-More: " + b"v" * 30_000 + b"\r\n\r\nGET / HTTP/1.1\r\nHost: x\r\n\r\n")
        await answers(reader, 2)
        writer.close()

        # (Review.) One field that never ends grows in httptools' own buffer, unseen by on_header.
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(head + b"X-Long: ")
        for _ in range(32):
            if writer.is_closing() or reader.at_eof():
                break
            writer.write(b"t" * 8192)
            await asyncio.sleep(0.01)
        assert await closed_within(reader, TIMEOUT / 2)
        writer.close()
