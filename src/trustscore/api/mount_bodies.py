"""Requests to the mounted JSON-RPC apps (MCP at ``/mcp``, A2A at ``/a2a``): what is not a JSON-RPC
request answered here, and bodies read within a bound, before their SDK sees them.

Litestar's per-route body limits do not reach an ASGI mount: the A2A SDK read a body of any size (150 MB
was read and parsed, found by fuzzing), and the MCP SDK's own bound (4 MiB) answered a plain-text 413
without a content type and did not heed the operator's ``TRUSTSCORE_MAX_BODY_BYTES``. A body past the
bound is a :class:`~trustscore.errors.PayloadTooLarge` (the app answers 413 problem+json), whether its
length is declared or it comes chunked (counted as it arrives, never read further).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import TypeVar

import msgspec
from litestar.types import HTTPRequestEvent, HTTPResponseStartEvent, Receive, ReceiveMessage, Scope, Send

from trustscore.api.framing import declared_length
from trustscore.api.problems import MAX_INSTANCE, MEDIA_TYPE, error_problem, problem_content
from trustscore.errors import InvalidInput, PayloadTooLarge, TrustscoreError


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


T = TypeVar("T")


def asked(scope: Scope) -> str:
    """The path the client asked for: a mount sees only its own part of it (``/`` for ``/mcp/``)."""
    raw = scope.get("raw_path")
    path = raw.decode("latin-1") if isinstance(raw, bytes) and raw else str(scope.get("path", ""))
    return path if len(path) <= MAX_INSTANCE else ""


async def send_problem(
    send: Send, content: Mapping[str, object], headers: Mapping[str, str] | None = None
) -> None:
    """A problem+json answer sent by hand (a mount answers below Litestar's response machinery)."""
    body = msgspec.json.encode(content)
    start: HTTPResponseStartEvent = {
        "type": "http.response.start",
        "status": int(str(content["status"])),
        "headers": [
            (b"content-type", MEDIA_TYPE.encode()),
            (b"content-length", str(len(body)).encode()),
            *((k.lower().encode(), v.encode()) for k, v in (headers or {}).items()),
        ],
    }
    await send(start)
    await send({"type": "http.response.body", "body": body, "more_body": False})


async def gate(scope: Scope, send: Send, not_post: str) -> bool:
    """Answer here an HTTP request that is no JSON-RPC request for the mount's SDK, each problem+json
    naming the path asked (True when answered): a path below the mount's own (404, whatever the method),
    a method other than POST (OPTIONS 204, any other 405 with ``not_post``; both ``Allow: POST``), a body
    not declared ``application/json`` (415). The SDKs answered those in plain text or with no content
    type at all. ``scope`` (the mount's own copy) is handed on with its Content-Type in lower case."""
    allow, method = {"Allow": "POST"}, str(scope.get("method", ""))
    if scope["path"].strip("/"):
        detail = "no such path: the endpoint takes JSON-RPC requests at its own path only"
        await send_problem(send, problem_content(404, "not-found", "Not found", detail, asked(scope)))
        return True
    if method == "OPTIONS":
        await send({"type": "http.response.start", "status": 204, "headers": [(b"allow", b"POST")]})
        await send({"type": "http.response.body", "body": b"", "more_body": False})
        return True
    if method != "POST":
        await send_problem(
            send,
            problem_content(405, "method-not-allowed", "Method not allowed", not_post, asked(scope)),
            allow,
        )
        return True
    declared = next((v for k, v in scope["headers"] if k == b"content-type"), b"")
    media, semicolon, parameters = declared.partition(b";")
    if media.strip().lower() != b"application/json":
        detail = "the request body must be declared Content-Type: application/json (a JSON-RPC request)"
        await send_problem(
            send,
            problem_content(415, "unsupported-media-type", "Unsupported media type", detail, asked(scope)),
        )
        return True
    # Media types are case-insensitive (RFC 9110); the MCP SDK compares the header as it came: given
    # "Application/JSON" it answered a JSON-RPC 415 of its own. The SDK gets it in lower case.
    normal = b"application/json" + semicolon + parameters
    scope["headers"] = [(k, normal if k == b"content-type" else v) for k, v in scope["headers"]]
    return False


async def answered(scope: Scope, send: Send, read: Callable[[], Awaitable[T]]) -> T | None:
    """``read()`` (a mount's reading of the body), or None when it refused the request and the refusal
    was answered here, problem+json naming the path asked (a 413, 400 or 429 raised in a mount named the
    mount's own path, ``/``)."""
    try:
        return await read()
    except TrustscoreError as exc:
        content, headers = error_problem(exc, asked(scope))
        await send_problem(send, content, headers)
        return None
