"""Request bodies of the mounted JSON-RPC apps (MCP at ``/mcp``, A2A at ``/a2a``), read within a bound
before their SDK sees them.

Litestar's per-route body limits do not reach an ASGI mount: the A2A SDK read a body of any size (150 MB
was read and parsed, found by fuzzing), and the MCP SDK's own bound (4 MiB) answered a plain-text 413
without a content type and did not heed the operator's ``TRUSTSCORE_MAX_BODY_BYTES``. A body past the
bound is a :class:`~trustscore.errors.PayloadTooLarge` (the app answers 413 problem+json), whether its
length is declared or it comes chunked (counted as it arrives, never read further).
"""

from __future__ import annotations

from litestar.types import HTTPRequestEvent, Receive, ReceiveMessage, Scope

from trustscore.api.framing import declared_length
from trustscore.errors import InvalidInput, PayloadTooLarge


async def bounded_body(scope: Scope, receive: Receive, limit: int) -> bytes:
    """The whole body of the request ``scope``, at most ``limit`` bytes."""
    too_large = PayloadTooLarge(f"the request body is larger than this route accepts ({limit} bytes at most)")
    declared = declared_length(scope)
    if declared is not None and declared > limit:
        raise too_large
    body = bytearray()
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client went away
            raise InvalidInput("the request ended before its body")
        body += message.get("body", b"")
        if len(body) > limit:
            raise too_large
        if not message.get("more_body", False):
            return bytes(body)


def replayed(body: bytes, receive: Receive) -> Receive:
    """A receive for the SDK: ``body`` as the one request message, then ``receive``'s (a disconnect)."""
    handed = False

    async def replay() -> ReceiveMessage:
        nonlocal handed
        if handed:
            return await receive()
        handed = True
        whole: HTTPRequestEvent = {"type": "http.request", "body": body, "more_body": False}
        return whole

    return replay
