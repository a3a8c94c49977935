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


async def closed_within(reader: asyncio.StreamReader, seconds: float) -> bool:
    try:
        return await asyncio.wait_for(reader.read(), seconds) == b""
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
