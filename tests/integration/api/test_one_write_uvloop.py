"""The held-write transport under uvloop, the loop `trustscore serve` runs on (uvicorn's loop="auto"
picks uvloop, installed by uvicorn[standard]). uvloop runs I/O callbacks between a held write and its
call_soon flush; a peer's FIN read there makes the transport close itself (eof_received returns None) and
flush() dropped the held bytes, where stock uvicorn sends them (found by review; the protocol now flushes
in eof_received). On asyncio the flush always comes before the next I/O callback, so
test_one_write_responses.py could not see this. Each test runs against both protocols."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
import uvicorn
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from trustscore.cli.http_protocol import OneWriteHttpToolsProtocol

ENTERED = threading.Event()  # the handler has started: the client half-closes only then


async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    if scope["type"] != "http":
        return
    ENTERED.set()
    time.sleep(0.3)  # noqa: ASYNC251 - synchronous work on purpose: the client's FIN arrives meanwhile
    if scope["path"] == "/stream":
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"one", "more_body": True})
        time.sleep(0.3)  # noqa: ASYNC251 - the loop is blocked between the two chunks on purpose
        await send({"type": "http.response.body", "body": b"two", "more_body": False})
        return
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-length", b"2")]})
    await send({"type": "http.response.body", "body": b"ok"})


def serve(protocol: type) -> Iterator[int]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    config = uvicorn.Config(app, loop="uvloop", http=protocol, lifespan="off", log_config=None)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    yield sock.getsockname()[1]
    server.should_exit = True
    thread.join(5)


@pytest.fixture(params=[HttpToolsProtocol, OneWriteHttpToolsProtocol], ids=["stock", "held"])
def port(request: pytest.FixtureRequest) -> Iterator[int]:
    yield from serve(request.param)


def ask_and_half_close(port: int, request: bytes) -> bytes:
    ENTERED.clear()
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(request)
    assert ENTERED.wait(10)  # the server is inside the handler's synchronous work
    s.shutdown(socket.SHUT_WR)  # e.g. `printf 'HEAD / ...' | nc -N`, scripted probes
    s.settimeout(3)
    data = b""
    while chunk := s.recv(65536):
        data += chunk
    s.close()
    return data


def test_a_keep_alive_head_answer_reaches_a_half_closing_client(port: int) -> None:
    answer = ask_and_half_close(port, b"HEAD / HTTP/1.1\r\nHost: t\r\n\r\n")
    assert answer.startswith(b"HTTP/1.1 200 OK\r\n")  # held: b"" (the head was dropped)


def test_a_streamed_answer_reaches_a_half_closing_client_whole(port: int) -> None:
    answer = ask_and_half_close(port, b"GET /stream HTTP/1.1\r\nHost: t\r\n\r\n")
    assert answer.endswith(b"3\r\ntwo\r\n0\r\n\r\n")  # held: ends after 'one' (last chunk dropped)
