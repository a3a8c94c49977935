"""``POST /v1/log/entries`` answered without the framework's per-request work (issue #16).

Appending one envelope per request is the hottest write. Routed through Litestar, such a request spent
11-19 % of the server's CPU in the framework around the handler (the router, the request object,
the before-request hook, the handler's signature model, the exception middleware), against what it
costs to parse, verify and write the envelope (bench/README.md, "Ingest, session 19"). This ASGI wrapper
answers the plain form of that request itself, with the same checks in the same order and the same
bytes (the handler's :func:`~trustscore.api.log_routes.appended_response`, the routes' one mapping of
errors :func:`~trustscore.api.problems.error_problem`). Any other form goes to Litestar as before, so
every edge case keeps the framework's answer: a query string (checked there), a browser's ``Origin`` or
``Sec-Fetch-Site`` (refused there), a body without ``Content-Length`` or above the limit (413 there), a
Host of other characters than a name's or an address's (some refused there), a root path, another method
or path. ``tests/integration/api/test_fast_append.py`` sends each request both
ways and compares the answers.
"""

from __future__ import annotations

import re
from typing import Any

import msgspec
from litestar.datastructures import State
from litestar.enums import ScopeType
from litestar.response.base import ASGIResponse
from litestar.types import ASGIApp, Receive, Scope, Send

from trustscore.api.addresses import address_of
from trustscore.api.log_routes import appended_response
from trustscore.api.problems import MEDIA_TYPE, error_problem
from trustscore.api.wiring import log_service
from trustscore.services.ratelimit import KeyRateLimiter

PATH = "/v1/log/entries"
#: Request headers that send the request to Litestar: a browser's (refused there), or a body framed by
#: chunks (its size known only once read, limited there).
_FRAMEWORK_HEADERS = frozenset({b"origin", b"sec-fetch-site", b"transfer-encoding"})
#: A Host of these characters only (a name, an IPv4 or bracketed IPv6 address, a port), which Litestar's
#: router accepts too; any other goes to Litestar, which refuses some before routing (400 "Invalid host
#: header": a space, a slash, a quote; found by review, the fast path wrote such requests' entries).
_PLAIN_HOST = re.compile(rb"[0-9A-Za-z.\-:\[\]]*\Z")


def fast_append(inner: ASGIApp, state: State, per_address: KeyRateLimiter, max_body: int) -> ASGIApp:
    """``inner`` (the app's ASGI handler) with the plain single-route appends answered directly; the
    appends charge ``per_address`` as the app's before-request hook does, bodies up to ``max_body``."""

    async def handler(scope: Scope, receive: Receive, send: Send) -> None:
        if (
            scope["type"] == ScopeType.HTTP
            and scope["method"] == "POST"
            and scope["path"] == PATH
            and not scope.get("query_string")
            and not scope.get("root_path")
            and _plain_request(scope["headers"], max_body)
        ):
            response = await _append(scope, receive, state, per_address)
            if response is not None:
                await response(scope, receive, send)
            return
        await inner(scope, receive, send)

    return handler


def _plain_request(headers: Any, max_body: int) -> bool:
    """A body of a declared length within ``max_body``, from a program, not a web page, naming a plain
    host."""
    length = None
    for name, value in headers:
        if name in _FRAMEWORK_HEADERS:
            return False
        if name == b"content-length":
            length = value
        elif name == b"host" and not _PLAIN_HOST.match(value):
            return False
    # (the HTTP parser refuses a length beyond 64 bits; 19 digits keep int() from reading a long one)
    return length is not None and len(length) <= 19 and length.isdigit() and int(length) <= max_body


async def _append(
    scope: Scope, receive: Receive, state: State, per_address: KeyRateLimiter
) -> ASGIResponse | None:
    """The answer to one append, an error's included; None when the client left before its body came."""
    try:
        address = address_of(scope)
        per_address.check(address)  # before the body is read, as in the before-request hook
        service = log_service(state)
        body = await _body(receive)
        if body is None:
            return None
        return appended_response(await service.submit(body, address))
    except Exception as exc:
        content, headers = error_problem(exc, PATH)
        return ASGIResponse(
            body=msgspec.json.encode(content),
            status_code=content["status"],
            media_type=MEDIA_TYPE,
            headers=headers,
        )


async def _body(receive: Receive) -> bytes | None:
    """The request body (its length was declared and bounded, and the HTTP parser holds the client to
    it), or None if the client disconnected first."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":  # http.disconnect
            return None
        chunks.append(message["body"])
        if not message.get("more_body", False):
            return b"".join(chunks)
