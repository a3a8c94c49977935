"""uvicorn's httptools protocol with a response's head and body sent in one write.

uvicorn writes a response's status line and headers when the app sends ``http.response.start`` and the
body when it sends ``http.response.body``: two ``send`` system calls per response, each waking the client.
On loopback and in small VMs a wake-up is the dearest part of answering a small request (py-spy: the two
writes were ~38 % of the server's CPU under ``wrk`` against ``/healthz``). This protocol gives uvicorn a
transport that holds a write until the next write or the end of the event loop's current iteration,
whichever comes first, so a head followed by its body at once leaves as one segment, and a write that
nothing follows (a streamed response's chunk) waits no longer than one loop iteration.

It also bounds the time a client may take to send a request's headers (:data:`HEADER_TIMEOUT`, from
connecting or from the first byte after a response): uvicorn has no such limit, so a client sending
nothing, or its headers a byte at a time, held a connection for as long as it liked (found by fuzzing;
300 held at once). It bounds their size too (:data:`MAX_HEADER_BYTES`; httptools has no bound). Between
requests uvicorn's own keep-alive timeout applies, as before.
"""

from __future__ import annotations

import asyncio
from typing import Any, cast

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

JOIN_BELOW = 1 << 16  # held + next write joined by copying below this size; passed as two buffers above
MAX_HEADER_BYTES = 64 * 1024  # a request line and headers beyond this close the connection
HEADER_TIMEOUT = 20.0  # seconds from connecting, or from the first byte after a response, to the headers' end


class HeldWriteTransport:
    """A transport that holds one write until the next one (sent together) or the loop's next turn."""

    __slots__ = ("_held", "_loop", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None

    def write(self, data: bytes | bytearray | memoryview) -> None:
        held = self._held
        if held is None:
            self._held = bytes(data)
            self._loop.call_soon(self.flush)
            return
        self._held = None
        if len(held) + len(data) < JOIN_BELOW:
            self._transport.write(held + data)
        else:
            self._transport.writelines((held, data))

    def flush(self) -> None:
        held = self._held
        if held is not None:
            self._held = None
            if not self._transport.is_closing():
                self._transport.write(held)

    def close(self) -> None:
        self.flush()
        self._transport.close()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class OneWriteHttpToolsProtocol(HttpToolsProtocol):
    """:class:`HttpToolsProtocol` writing through a :class:`HeldWriteTransport`, closing a connection
    whose request headers take longer than :attr:`header_timeout`."""

    held: HeldWriteTransport
    header_timeout = HEADER_TIMEOUT
    max_header_bytes = MAX_HEADER_BYTES
    _header_timer: asyncio.TimerHandle | None = None
    _header_bytes = 0  # bytes read since the last request's headers ended (or the connection began)
    _in_message = False  # between a request's first byte and its body's end
    _in_headers = False  # between a request's first byte and its headers' end

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # Not a subclass of asyncio.Transport, whose methods would shadow the delegation.
        self.held = HeldWriteTransport(cast(asyncio.Transport, transport), self.loop)
        super().connection_made(cast(asyncio.Transport, self.held))
        self._arm_header_timer()  # a client that connects and sends nothing

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm_header_timer()
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        # Bytes arriving between messages start the clock (they end uvicorn's keep-alive wait): blank
        # lines there never begin a request, and kept a connection open for good (found by review). Not
        # inside a message: the rest of a body the app answered without reading is no header (closing
        # on it reset the connection and lost the answer, found by review).
        if self._header_timer is None and not self._in_message and self._answered():
            self._arm_header_timer()
        # Size is counted apart from the clock: a pipelined request's headers are read while the answer
        # before it is made, before its clock starts (16 MiB were read so, found by review). A body in
        # the same read is dropped from the count when its headers end (on_headers_complete).
        if self._reading_headers():
            self._header_bytes += len(data)
        super().data_received(data)
        # Still in headers after this much: httptools sets no bound (a 64 MB header was read, in 8 s of
        # CPU; found by review).
        if self._reading_headers() and self._header_bytes > self.max_header_bytes:
            self._headers_too_slow()

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._in_message = self._in_headers = True
        # A pipelined request read while the one before is answered waits for that answer: reading is
        # paused meanwhile, so its clock starts when the answer is complete (on_response_complete).
        if self._header_timer is None and self._answered():
            self._arm_header_timer()

    def on_headers_complete(self) -> None:
        self._in_headers = False
        self._header_bytes = 0
        self._disarm_header_timer()
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        self._in_message = False
        super().on_message_complete()
        # The end of a body the app answered without reading: its bytes stopped uvicorn's keep-alive
        # wait, and nothing would end an idle connection now (found by review).
        if self._answered() and self._header_timer is None and not self.transport.is_closing():
            self._arm_header_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self._in_headers and self._header_timer is None and not self.transport.is_closing():
            self._arm_header_timer()

    def _reading_headers(self) -> bool:
        """Between messages, or inside a request's first line and headers."""
        return self._in_headers or not self._in_message

    def _answered(self) -> bool:
        """No response is being made (none yet on this connection, or the last one is complete)."""
        return self.cycle is None or self.cycle.response_complete

    def _arm_header_timer(self) -> None:
        self._disarm_header_timer()
        self._header_timer = self.loop.call_later(self.header_timeout, self._headers_too_slow)

    def _disarm_header_timer(self) -> None:
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None

    def _headers_too_slow(self) -> None:
        """Close the connection: its request's headers came too slowly, or too many of them."""
        self._disarm_header_timer()
        if not self.transport.is_closing():
            self.transport.close()

    def eof_received(self) -> None:
        """The client half-closed. uvloop closes the transport itself once this returns (not through the
        held-write transport, and it may run this between a write and its flush), so send what is held
        first: a response's last write must not be dropped (found by review: a HEAD answer or a stream's
        last chunk to a client that sent its request and then shut down its side)."""
        self.held.flush()
        super().eof_received()
