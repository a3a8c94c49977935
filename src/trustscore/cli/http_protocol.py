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
300 held at once). It bounds their size too (:data:`MAX_HEADER_BYTES`; httptools has no bound), and a
chunked body's trailer section's (its fields are dropped). Between requests uvicorn's own keep-alive
timeout applies, as before.

And it bounds the two slow halves the header clock leaves open (uvicorn bounds neither), by progress,
not by declared sizes:

- a request's body, from its headers' end, must bring at least :data:`MIN_BODY_RATE` bytes a second over
  each :data:`BODY_TIMEOUT` window until it ends, and end within :data:`MAX_BODY_TIME`; windows in which
  the server is the one waiting (reading paused: the app has not read what came, or the request is
  queued behind another's answer; or ``100 Continue`` not yet sent) do not count;
- an answer whose client takes none of it for :data:`SEND_TIMEOUT` while bytes wait to be sent (taken:
  gone from the transport's buffer and, on Linux, from the kernel's send queue; looked at every quarter
  of the bound) is cut off: the connection is aborted, since a close waits for the unsent bytes. This
  holds after the close too (a keep-alive close or a timeout's), so a client reading nothing never
  keeps a connection.

Before, a client sending its body a byte at a time, or reading none of a large answer, held the
connection and the app's task for as long as it liked.

Those clocks bound how long a connection lasts; :func:`per_address` bounds how many one client address
holds open at once (a new one past the bound is closed before a byte is read).
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import struct
import termios
from collections.abc import Callable
from typing import Any, ClassVar, TypeVar, cast

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

from trustscore.api.addresses import network_of

JOIN_BELOW = 1 << 16  # held + next write joined by copying below this size; passed as two buffers above
MAX_HEADER_BYTES = 64 * 1024  # a request line and headers beyond this close the connection
HEADER_TIMEOUT = 20.0  # seconds from connecting, or from the first byte after a response, to the headers' end
BODY_TIMEOUT = 30.0  # seconds of a window in which a body still arriving must bring MIN_BODY_RATE's due
MIN_BODY_RATE = 32 * 1024  # bytes per second a body must average over each window: 960 KiB in 30 s
MAX_BODY_TIME = 600.0  # seconds of the client's time no body may exceed (16 MiB at the minimum rate: 512 s)
SEND_TIMEOUT = 60.0  # seconds in which a client must read some of an answer waiting to be sent
OUTQ: int | None = getattr(termios, "TIOCOUTQ", None)  # ioctl: bytes in a socket's send queue (Linux)


def cancel(timer: asyncio.TimerHandle | None) -> None:
    """Cancel ``timer`` if there is one."""
    if timer is not None:
        timer.cancel()


def rearmed(
    timer: asyncio.TimerHandle | None,
    loop: asyncio.AbstractEventLoop,
    seconds: float,
    then: Callable[[], None],
) -> asyncio.TimerHandle:
    """``timer`` cancelled and a new one calling ``then`` in ``seconds``."""
    cancel(timer)
    return loop.call_later(seconds, then)


class HeldWriteTransport:
    """A transport that holds one write until the next one (sent together) or the loop's next turn, and
    watches what it could not send at once: if the client takes none of it for ``stall_timeout`` seconds
    (looked at every quarter of that: the bound is met within a quarter more), the connection is
    aborted (see the module's docstring)."""

    __slots__ = (
        "_held", "_last_taken", "_loop", "_lost", "_progress_at", "_transport", "_watch", "_written",
        "stall_timeout",
    )  # fmt: skip

    def __init__(
        self,
        transport: asyncio.Transport,
        loop: asyncio.AbstractEventLoop,
        stall_timeout: float = SEND_TIMEOUT,
    ) -> None:
        self._transport = transport
        self._loop = loop
        self._held: bytes | None = None
        self.stall_timeout = stall_timeout
        self._written = 0  # bytes handed to the transport
        self._last_taken = 0  # of those, the bytes the client had taken at the watchdog's last look
        self._progress_at = 0.0  # loop time of the last look that found progress (or of arming)
        self._watch: asyncio.TimerHandle | None = None
        self._lost = False  # the connection is gone: nothing more to watch

    def write(self, data: bytes | bytearray | memoryview) -> None:
        held = self._held
        if held is None:
            self._held = bytes(data)
            self._loop.call_soon(self.flush)
            return
        self._held = None
        if len(held) + len(data) < JOIN_BELOW:
            self._send(held + data)
        else:
            # Counted first: the write may call pause_writing, which starts the watch (found by review:
            # its mark was a write short, so the first look always saw progress).
            self._written += len(held) + len(data)
            self._transport.writelines((held, data))
            self.watch()

    def flush(self) -> None:
        held = self._held
        if held is not None:
            self._held = None
            if not self._transport.is_closing():
                self._send(held)

    def close(self) -> None:
        self.flush()
        self._transport.close()
        self.watch()  # a close waits for the unsent bytes: the watchdog still bounds that wait

    def lost(self) -> None:
        """The connection is gone: stop watching, for good (uvloop still reports the unsent bytes of an
        aborted transport, and uvicorn closes it again after: the watch restarted and later read the
        send queue of a new connection that had the same descriptor, found by review)."""
        self._lost = True
        self.unwatch()

    def _send(self, data: bytes) -> None:
        self._written += len(data)
        self._transport.write(data)
        self.watch()

    def watch(self) -> None:
        """Start looking, every quarter of ``stall_timeout``, if bytes wait to be sent and no look is due."""
        if self._watch is None and not self._lost and self._transport.get_write_buffer_size():
            self._last_taken = self._taken()
            self._progress_at = self._loop.time()
            self._watch = self._loop.call_later(self.stall_timeout / 4, self._look)

    def unwatch(self) -> None:
        cancel(self._watch)
        self._watch = None

    @property
    def watching(self) -> bool:
        """A look at unsent bytes is due."""
        return self._watch is not None

    def _look(self) -> None:
        """Abort if the client has taken nothing since the last progress, ``stall_timeout`` ago."""
        self._watch = None
        if self._lost or not self._transport.get_write_buffer_size():
            return
        taken, now = self._taken(), self._loop.time()
        if taken > self._last_taken:
            self._last_taken, self._progress_at = taken, now
        elif now - self._progress_at >= self.stall_timeout:
            self._transport.abort()
            return
        self._watch = self._loop.call_later(self.stall_timeout / 4, self._look)

    def _taken(self) -> int:
        """Bytes the client has taken: those written, less those still in the transport's buffer and,
        where the system says (Linux), in the kernel's send queue. Without the queue, a client reading
        steadily showed no progress while the kernel's buffer (megabytes on a fast link) drained."""
        unsent = self._transport.get_write_buffer_size()
        sock = self._transport.get_extra_info("socket")
        if OUTQ is not None and sock is not None:
            with contextlib.suppress(OSError, ValueError):
                unsent += struct.unpack("i", fcntl.ioctl(sock.fileno(), OUTQ, b"\0\0\0\0"))[0]
        return self._written - unsent

    def __getattr__(self, name: str) -> Any:
        return getattr(self._transport, name)


class OneWriteHttpToolsProtocol(HttpToolsProtocol):
    """:class:`HttpToolsProtocol` writing through a :class:`HeldWriteTransport`, closing a connection
    whose request headers take longer than :attr:`header_timeout` or whose body comes too slowly, and
    aborting one whose client reads none of an answer for :attr:`send_timeout`."""

    held: HeldWriteTransport
    header_timeout = HEADER_TIMEOUT
    max_header_bytes = MAX_HEADER_BYTES
    body_timeout = BODY_TIMEOUT
    min_body_rate = MIN_BODY_RATE
    max_body_time = MAX_BODY_TIME
    send_timeout = SEND_TIMEOUT
    max_per_address = 0  # connections one client address may hold open at once; 0: no bound (per_address)
    open_by_address: ClassVar[dict[str, int]] = {}  # per_address gives each bound class its own
    _address: str | None = None  # this connection's client address while counted in open_by_address
    _header_timer: asyncio.TimerHandle | None = None
    _body_timer: asyncio.TimerHandle | None = None
    _body_bytes = 0  # bytes of the current request's body read so far
    _body_mark = 0  # of those, the bytes read by the body clock's last look
    _body_time = 0.0  # seconds of the client's time the current body has taken, counted at each look
    _body_waited = False  # the server was the one waiting at the body clock's last look (or start)
    _header_bytes = 0  # bytes read since the last request's headers ended (or the connection began)
    _trailer_bytes = 0  # bytes read in the current request's trailer section (see data_received)
    _trailer_fields = 0  # bytes of its trailer fields' names and values (the fields are dropped)
    _chunk_open = False  # between a body chunk's header and its end (the last chunk's: its trailers)
    _chunk_body_at = 0  # _body_bytes when that chunk's header was read
    _in_message = False  # between a request's first byte and its body's end
    _in_headers = False  # between a request's first byte and its headers' end

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # Not a subclass of asyncio.Transport, whose methods would shadow the delegation.
        self.held = HeldWriteTransport(cast(asyncio.Transport, transport), self.loop, self.send_timeout)
        super().connection_made(cast(asyncio.Transport, self.held))
        if self.max_per_address and not self._take_place():
            self.transport.close()  # one too many from this address: refused before reading a byte
            return
        self._arm_header_timer()  # a client that connects and sends nothing

    def _take_place(self) -> bool:
        """Count this connection against its client address; False if the address has no place left."""
        host = network_of(self.client[0]) if self.client else None  # an IPv6 client counts as its /64
        if host is None:  # a Unix socket: no address to count
            return True
        held = self.open_by_address.get(host, 0)
        if held >= self.max_per_address:
            return False
        self.open_by_address[host] = held + 1
        self._address = host
        return True

    def connection_lost(self, exc: Exception | None) -> None:
        if self._address is not None:
            held = self.open_by_address.pop(self._address) - 1
            if held:
                self.open_by_address[self._address] = held
            self._address = None
        self._disarm_header_timer()
        self._disarm_body_timer()
        super().connection_lost(exc)
        self.held.lost()  # after uvicorn's own close of the transport, which would start the watch again

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
        # After a chunk's header and no body since, a read is the last chunk's trailer section (or the
        # data of a chunk whose header ended the last read: its body resets the count). httptools builds
        # an unended trailer field in its own buffer, which on_header never sees (found by review: one
        # 32 MiB field). Checked after parsing; up to one read past the bound, as for headers.
        elif self._chunk_open and self._body_bytes == self._chunk_body_at:
            self._trailer_bytes += len(data)
        super().data_received(data)
        # Still in headers after this much: httptools sets no bound (a 64 MB header was read, in 8 s of
        # CPU; found by review).
        if self._reading_headers() and self._header_bytes > self.max_header_bytes:
            self._headers_too_slow()
        if self._trailer_bytes > self.max_header_bytes:
            self._headers_too_slow()

    def on_chunk_header(self) -> None:
        self._chunk_open, self._chunk_body_at = True, self._body_bytes

    def on_chunk_complete(self) -> None:
        self._chunk_open = False

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._trailer_bytes = self._trailer_fields = 0
        self._in_message = self._in_headers = True
        # A pipelined request read while the one before is answered waits for that answer: reading is
        # paused meanwhile, so its clock starts when the answer is complete (on_response_complete).
        if self._header_timer is None and self._answered():
            self._arm_header_timer()

    def on_header(self, name: bytes, value: bytes) -> None:
        if self._in_headers:
            super().on_header(name, value)
            return
        # A trailer field, after a chunked body: uvicorn appended each to the request's headers, and no
        # bound counted them (found by review: 1 GB of trailers from one connection, in 3 s). Dropped,
        # and counted against the header bound.
        self._trailer_fields += len(name) + len(value)
        if self._trailer_fields > self.max_header_bytes:
            self._headers_too_slow()

    def on_headers_complete(self) -> None:
        self._in_headers = False
        self._header_bytes = 0
        self._disarm_header_timer()
        super().on_headers_complete()
        upgrading = self.parser.should_upgrade() and self._should_upgrade()  # another protocol takes over
        if self._has_body() and not upgrading:
            self._body_bytes = self._body_mark = 0
            self._body_time = 0.0
            self._body_waited = self._server_waits()
            self._arm_body_timer()

    def _has_body(self) -> bool:
        """The request declares a body: a Content-Length other than 0, or a transfer coding."""
        return any(
            (name == b"content-length" and value.strip() != b"0") or name == b"transfer-encoding"
            for name, value in self.headers
        )

    def on_body(self, body: bytes) -> None:
        self._body_bytes += len(body)  # counted even when uvicorn drops it (the request was answered)
        self._trailer_bytes = 0  # a read counted before this chunk's data began was no trailer
        super().on_body(body)

    def on_message_complete(self) -> None:
        self._in_message = False
        self._chunk_open = False  # llhttp completes the last chunk by completing the message
        self._disarm_body_timer()
        super().on_message_complete()
        # The end of a body the app answered without reading: its bytes stopped uvicorn's keep-alive
        # wait, and nothing would end an idle connection now (found by review).
        if self._answered() and self._header_timer is None and not self.transport.is_closing():
            self._arm_header_timer()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if self.transport.is_closing():
            return
        if self._in_headers and self._header_timer is None:
            self._arm_header_timer()

    def pause_writing(self) -> None:
        super().pause_writing()
        self.held.watch()

    def _reading_headers(self) -> bool:
        """Between messages, or inside a request's first line and headers."""
        return self._in_headers or not self._in_message

    def _answered(self) -> bool:
        """No response is being made (none yet on this connection, or the last one is complete)."""
        return self.cycle is None or self.cycle.response_complete

    def _arm_header_timer(self) -> None:
        self._header_timer = rearmed(
            self._header_timer, self.loop, self.header_timeout, self._headers_too_slow
        )

    def _disarm_header_timer(self) -> None:
        cancel(self._header_timer)
        self._header_timer = None

    def _arm_body_timer(self) -> None:
        self._body_timer = rearmed(self._body_timer, self.loop, self.body_timeout, self._look_at_body)

    def _disarm_body_timer(self) -> None:
        cancel(self._body_timer)
        self._body_timer = None

    def _server_waits(self) -> bool:
        """The body is held up by the server, not the client: reading is paused (the app has not read
        what came, or the request is queued behind another's answer), or ``100 Continue`` is not sent."""
        cycle = self.cycle
        return self.flow.read_paused or (
            cycle is not None and cycle.waiting_for_100_continue and not cycle.response_complete
        )

    def _look_at_body(self) -> None:
        """At the end of a window: close the connection if the body brought less than its due in it, or
        has taken :attr:`max_body_time`. The app reading it is told the client went away
        (``http.disconnect``), so nothing of the request is carried out. A window at whose start or end
        the server was waiting is not counted: ``100 Continue`` sent just before a look left the client
        no time to send (found by a flaky test)."""
        self._body_timer = None
        if self.transport.is_closing():
            return
        came, self._body_mark = self._body_bytes - self._body_mark, self._body_bytes
        waited, self._body_waited = self._body_waited, self._server_waits()
        if not (waited or self._body_waited):  # a window the server waited in, at its start or end
            self._body_time += self.body_timeout
            if came < self.min_body_rate * self.body_timeout or self._body_time >= self.max_body_time:
                self.transport.close()
                return
        self._arm_body_timer()

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


P = TypeVar("P", bound=OneWriteHttpToolsProtocol)


def per_address(protocol: type[P], limit: int) -> type[P]:
    """``protocol`` holding at most ``limit`` connections open per client address at once (a new one
    past it is closed before a byte is read), with its own count; ``protocol`` itself when ``limit`` is 0.
    The count is this process's: N serving processes allow N times as many."""
    if not limit:
        return protocol
    attributes = {"max_per_address": limit, "open_by_address": {}}
    return cast("type[P]", type(f"{protocol.__name__}PerAddress", (protocol,), attributes))
