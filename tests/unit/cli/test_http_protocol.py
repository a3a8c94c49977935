"""The held-write transport under uvicorn's protocol: a head and its body leave in one write, nothing is
held past the loop's next turn, order is kept, and close sends what is held first."""

from __future__ import annotations

import asyncio
from typing import Any

from trustscore.cli.http_protocol import JOIN_BELOW, HeldWriteTransport


class Recording:
    """A transport that records what reaches it."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []
        self.closing = False

    def write(self, data: bytes) -> None:
        assert not self.closing
        self.calls.append(("write", bytes(data)))

    def writelines(self, parts: Any) -> None:
        self.calls.append(("writelines", [bytes(p) for p in parts]))

    def close(self) -> None:
        self.calls.append(("close", None))
        self.closing = True

    def is_closing(self) -> bool:
        return self.closing

    unsent = 0  # bytes the transport says it could not send yet

    def get_write_buffer_size(self) -> int:
        return self.unsent

    def get_extra_info(self, name: str, default: Any = None) -> Any:
        return {"peername": ("127.0.0.1", 1)}.get(name, default)


def held() -> tuple[HeldWriteTransport, Recording]:
    inner = Recording()
    return HeldWriteTransport(inner, asyncio.get_running_loop()), inner  # type: ignore[arg-type]


async def test_a_head_and_its_body_leave_in_one_write() -> None:
    t, inner = held()
    t.write(b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\n")
    t.write(b"abc")
    assert inner.calls == [("write", b"HTTP/1.1 200 OK\r\ncontent-length: 3\r\n\r\nabc")]
    await asyncio.sleep(0)
    assert len(inner.calls) == 1  # the flush scheduled for the head finds nothing held


async def test_a_lone_write_waits_one_turn_of_the_loop_and_no_more() -> None:
    t, inner = held()
    t.write(bytearray(b"chunk"))
    assert inner.calls == []
    await asyncio.sleep(0)
    assert inner.calls == [("write", b"chunk")]


async def test_writes_keep_their_order() -> None:
    t, inner = held()
    for part in (b"1", b"2", b"3"):
        t.write(part)
    await asyncio.sleep(0)
    t.write(b"4")
    t.write(memoryview(b"5"))
    await asyncio.sleep(0)
    assert inner.calls == [("write", b"12"), ("write", b"3"), ("write", b"45")]


async def test_close_sends_what_is_held_first() -> None:
    t, inner = held()
    t.write(b"last words")
    t.close()
    assert inner.calls == [("write", b"last words"), ("close", None)]
    await asyncio.sleep(0)
    assert len(inner.calls) == 2


async def test_a_large_body_is_passed_on_without_a_copy_into_one_buffer() -> None:
    t, inner = held()
    body = b"x" * JOIN_BELOW
    t.write(b"head")
    t.write(body)
    assert inner.calls == [("writelines", [b"head", body])]


async def test_nothing_is_written_to_a_transport_already_closing() -> None:
    t, inner = held()
    t.write(b"late")
    inner.closing = True  # the peer went away: the transport closed itself
    await asyncio.sleep(0)
    assert inner.calls == []


async def test_everything_else_is_the_transport_s() -> None:
    t, _ = held()
    assert t.get_extra_info("peername") == ("127.0.0.1", 1)
    assert t.is_closing() is False


async def test_unsent_bytes_are_watched_until_the_connection_is_lost_and_not_after() -> None:
    """(Review.) On uvloop an aborted transport still reports its unsent bytes, and uvicorn closes it
    again after connection_lost: the watch restarted, and later read the send queue of whatever new
    connection had the same descriptor."""
    t, inner = held()
    inner.unsent = 100
    t.write(b"x")
    await asyncio.sleep(0)
    assert t.watching
    t.lost()
    assert not t.watching
    t.close()  # as uvicorn does after connection_lost
    assert not t.watching
