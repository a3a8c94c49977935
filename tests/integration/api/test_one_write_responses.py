"""``trustscore serve``'s HTTP protocol on a real uvicorn server and real sockets: each plain response
reaches the socket in one write, and every kind of response (keep-alive runs, streamed chunks with pauses,
HEAD, 204, a body of several MiB, Connection: close) arrives whole and in order."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, ClassVar

import pytest

from tests.uvicorn_served import served
from trustscore.cli.http_protocol import OneWriteHttpToolsProtocol

BIG = bytes(range(256)) * (3 * 4096 + 7)  # ~3 MiB


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    path = scope["path"]
    if path == "/stream":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        for part in (b"one,", b"two,", b"three"):
            await asyncio.sleep(0.01)
            await send({"type": "http.response.body", "body": part, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return
    if path == "/empty":
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})
        return
    body = BIG if path == "/big" else path.encode()
    headers = [(b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class Counted:
    writes: ClassVar[list[bytes]] = []  # what reached the real transport, in order


class Spy:
    """A stand-in for the real transport that records its writes and passes everything on."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def write(self, data: bytes) -> None:
        Counted.writes.append(bytes(data))
        self.inner.write(data)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


class CountedProtocol(OneWriteHttpToolsProtocol):
    def connection_made(self, transport: Any) -> None:
        super().connection_made(Spy(transport))  # type: ignore[arg-type]


@pytest.fixture
async def server() -> AsyncIterator[int]:
    async with served(app, CountedProtocol, lifespan="on") as port:
        yield port


async def exchange(port: int, request: bytes, until: bytes | int) -> bytes:
    """Send ``request`` and read until ``until`` (bytes that end the answer, or its length)."""
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    writer.write(request)
    data = b""
    while (len(data) < until) if isinstance(until, int) else not data.endswith(until):
        chunk = await asyncio.wait_for(reader.read(1 << 16), 10)
        if not chunk:
            break
        data += chunk
    writer.close()
    return data


def get(path: str, *, method: str = "GET", close: bool = False) -> bytes:
    extra = "Connection: close\r\n" if close else ""
    return f"{method} {path} HTTP/1.1\r\nHost: t\r\n{extra}\r\n".encode()


async def test_a_plain_response_reaches_the_socket_in_one_write(server: int) -> None:
    Counted.writes.clear()
    answer = await exchange(server, get("/hello"), b"/hello")
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n") and answer.endswith(b"\r\n\r\n/hello")
    assert Counted.writes == [answer]


async def test_keep_alive_requests_each_get_their_own_whole_answer(server: int) -> None:
    Counted.writes.clear()
    answer = await exchange(server, get("/a") + get("/bb") + get("/ccc"), b"/ccc")
    assert [w.rsplit(b"\r\n\r\n", 1)[1] for w in Counted.writes] == [b"/a", b"/bb", b"/ccc"]
    assert answer == b"".join(Counted.writes)


async def test_streamed_chunks_are_sent_as_they_come(server: int) -> None:
    Counted.writes.clear()
    answer = await exchange(server, get("/stream"), b"0\r\n\r\n")
    assert answer.endswith(b"4\r\none,\r\n4\r\ntwo,\r\n5\r\nthree\r\n0\r\n\r\n")
    assert b"transfer-encoding: chunked" in answer
    # the head waits for the first chunk only one turn of the loop, not the 10 ms sleep: four writes
    assert len(Counted.writes) >= 4


async def test_head_204_close_and_a_big_body(server: int) -> None:
    head = await exchange(server, get("/hello", method="HEAD", close=True), b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 OK\r\n") and head.endswith(b"\r\n\r\n")
    empty = await exchange(server, get("/empty", close=True), b"\r\n\r\n")
    assert empty.startswith(b"HTTP/1.1 204 No Content\r\n")
    closing = await exchange(server, get("/bye", close=True), 10**9)  # read until the server closes
    assert closing.endswith(b"\r\n\r\n/bye") and b"connection: close" in closing.lower()
    Counted.writes.clear()
    big = await exchange(server, get("/big"), BIG[-64:])
    assert big.split(b"\r\n\r\n", 1)[1] == BIG
