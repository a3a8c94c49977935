"""Request bodies charged to their client address by the byte, as the app reads them (issue #10's write limits).

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

The bytes are charged by an ASGI wrapper around the whole app when the app reads the body, before
anything parses it: a body of a declared length is paid whole before its first byte is read, a chunked
one chunk by chunk as it arrives. One the address's allowance cannot pay is refused (429 problem+json,
``Retry-After``) there, on every route and on the MCP and A2A mounts. A body refused for its declared
size (413) is never read, so costs nothing here; nor does a request whose body the app never reads.
Like the entries' allowance, it is kept per process, and a rate of 0 turns it off.
"""

from __future__ import annotations

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Receive, ReceiveMessage, Scope, Send

from trustscore.api.addresses import address_of
from trustscore.api.framing import declared_length
from trustscore.errors import RateLimited
from trustscore.services.ratelimit import KeyRateLimiter

#: Bytes of request bodies an address may send per entry of its entries' allowance (rate and burst).
BODY_BYTES_PER_ENTRY = 64 * 1024


def body_allowance(entries_per_minute: float, entries_burst: int, max_body: int) -> KeyRateLimiter:
    """The bytes allowance of an address whose entries' allowance is ``entries_per_minute`` (burst
    ``entries_burst``); its burst holds at least ``max_body``, the largest body the app takes."""
    return KeyRateLimiter(
        entries_per_minute / 60 * BODY_BYTES_PER_ENTRY,
        max(max_body, entries_burst * BODY_BYTES_PER_ENTRY),
        what="client address (bytes of request bodies)",
    )


def charged_bodies(inner: ASGIApp, allowance: KeyRateLimiter) -> ASGIApp:
    """``inner`` with each HTTP request's body charged to its address in ``allowance`` when read: a
    declared length whole before the first read, a chunked body chunk by chunk; what it cannot pay raises
    :class:`~trustscore.errors.RateLimited` in the app's read of it (429 problem+json wherever that is)."""
    if allowance.rate <= 0:
        return inner

    async def handler(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await inner(scope, receive, send)
            return
        # The HTTP parser holds the client to a length it declared, so that is paid whole before the
        # first read (before uvicorn answers "100 Continue", before a byte is read): refused then, or
        # never again. A chunked body pays chunk by chunk as the app reads it (none of it is read while
        # the allowance is spent); one refused part-way gets back what it paid, so a client that waits out
        # Retry-After and sends it again gets through.
        first = True
        declared: int | None = None
        paid = 0  # bytes of a chunked body paid so far

        async def charged() -> ReceiveMessage:
            nonlocal first, declared, paid
            if first:
                declared = declared_length(scope)  # (InvalidInput for a malformed one: a 400)
                if declared is None:
                    allowance.check(address_of(scope))  # an allowance spent reads none of it
                elif declared:
                    allowance.take(address_of(scope), min(declared, allowance.burst))
                first = False  # paid, or a token left for a chunk (a refusal leaves it to be asked again)
            if declared is not None:
                return await receive()
            message = await receive()
            size = (
                min(len(message.get("body", b"")), allowance.burst)
                if message["type"] == "http.request"
                else 0
            )
            if size:
                address = address_of(scope)
                try:
                    allowance.take(address, size)
                except RateLimited:
                    # What it paid is given back (once): its Retry-After (for this chunk, with that back in
                    # the bucket) is then the wait for every byte of it received so far.
                    allowance.give(address, paid)
                    paid = 0
                    raise
                paid += size
            return message

        await inner(scope, charged, send)

    return handler
