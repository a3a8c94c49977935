"""Request bodies charged to their client address by the byte, as they arrive (issue #10's write limits).

The write limits count entries: a request costs its address one token per new entry, a refused one
costs one. A body's size did not count, yet reading and parsing it is the costly part of a refused
request: one address could send the largest body the app takes (16 MiB by default) as often as its
entries' allowance lets it (100 a second by default), each parsed on the event loop (~120 ms of
CPU for 16 MiB of small integers: bench/README.md, "Bodies charged by the byte"), and so keep the
process's core busy alone. Every body now also spends a second allowance of
its address, in bytes: :data:`BODY_BYTES_PER_ENTRY` per entry of the entries' allowance (6.25 MiB a
second at the default 6,000 entries a minute), its burst that many per entry of the entries' burst and
never less than the largest body the app takes. Writes of entries within the entries' allowance never
meet it unless their entries average more than 64 KiB.

The bytes are charged by an ASGI wrapper around the whole app when the app first reads the body, before
anything parses it: a body of a declared length is paid whole then, a chunked one chunk by chunk as it
arrives. One the address's allowance cannot pay is refused (429 problem+json, ``Retry-After``) there, on
every route and on the MCP and A2A mounts. A body refused for its declared size (413) is never read, so
costs nothing here. A request without a body costs nothing here. A rate of 0 turns it off, as it does the
entries' allowance.
"""

from __future__ import annotations

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Receive, ReceiveMessage, Scope, Send

from trustscore.api.addresses import address_of
from trustscore.services.ratelimit import KeyRateLimiter

#: Bytes of request bodies an address may send per entry of its entries' allowance (rate and burst).
BODY_BYTES_PER_ENTRY = 64 * 1024

#: Methods whose requests carry no body the app reads.
_BODILESS = frozenset({"GET", "HEAD", "OPTIONS"})


def body_allowance(entries_per_minute: float, entries_burst: int, max_body: int) -> KeyRateLimiter:
    """The bytes allowance of an address whose entries' allowance is ``entries_per_minute`` (burst
    ``entries_burst``); its burst holds at least ``max_body``, the largest body the app takes."""
    return KeyRateLimiter(
        entries_per_minute / 60 * BODY_BYTES_PER_ENTRY,
        max(max_body, entries_burst * BODY_BYTES_PER_ENTRY),
        what="client address (bytes of request bodies)",
    )


def charged_bodies(inner: ASGIApp, allowance: KeyRateLimiter) -> ASGIApp:
    """``inner`` with each HTTP request's body charged to its address in ``allowance`` as it arrives: a
    chunk it cannot pay raises :class:`~trustscore.errors.RateLimited` in the app's read of it."""
    if allowance.rate <= 0:
        return inner

    async def handler(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP or scope["method"] in _BODILESS:
            await inner(scope, receive, send)
            return
        address = address_of(scope)
        # A declared body is paid whole at its first read (the HTTP parser holds the client to the length
        # it declared): refused then, before a byte of it is read, or never. A chunked one chunk by chunk.
        declared = _declared_length(scope)

        async def charged() -> ReceiveMessage:
            nonlocal declared
            message = await receive()
            if message["type"] == "http.request":
                size = len(message.get("body", b"")) if declared is None else declared
                declared = 0  # paid
                if size:
                    # (more than the burst, which no route reads, pays a whole burst)
                    allowance.take(address, min(size, allowance.burst))
            return message

        await inner(scope, charged, send)

    return handler


def _declared_length(scope: Scope) -> int | None:
    """The body length ``scope`` declares (Content-Length), None when none or not a number (chunked: the
    HTTP parser refuses a malformed length before a request is made)."""
    for name, value in scope["headers"]:
        if name == b"content-length":
            # (19 digits keep int() from reading a long one; the parser refuses a length past 64 bits)
            return int(value) if len(value) <= 19 and value.isdigit() else None
    return None
