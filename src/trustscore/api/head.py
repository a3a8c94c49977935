"""HEAD on every GET route (RFC 9110 section 9.3.2): the GET's status and headers, no body.

Litestar routes a HEAD only to a handler declared for it, and refuses to declare one with a body, so
every GET route answered HEAD with 405, ``/checkpoint`` and ``/tile/*`` included, which mirrors and HTTP
caches use to revalidate (found by fuzzing). The app's ASGI handler is wrapped: a HEAD is routed as the
GET it asks about, and the body it produces is dropped (uvicorn drops it too, counting on the GET's
Content-Length; the test client does not). The GET's work is done in full: a HEAD costs what its GET
does, and is limited as a GET is.
"""

from __future__ import annotations

from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send


def answer_head(inner: ASGIApp) -> ASGIApp:
    """``inner`` with a HEAD request answered as its GET without the body."""

    async def handler(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP or scope["method"] != "HEAD":
            await inner(scope, receive, send)
            return

        async def headers_only(message: Message) -> None:
            if message["type"] == "http.response.body":
                message = {
                    "type": "http.response.body",
                    "body": b"",
                    "more_body": message.get("more_body", False),
                }
            await send(message)

        await inner({**scope, "method": "GET"}, receive, headers_only)

    return handler
