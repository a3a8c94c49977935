"""Who a write is charged to: the client address, and which routes charge it per entry written."""

from __future__ import annotations

from typing import Any

from litestar import Request
from litestar.types import Scope

from trustscore.errors import Forbidden

#: Routes whose cost is counted per new entry written, by the services (docs/service.md).
ENTRY_ROUTES = frozenset(
    {
        "/v1/log/entries",
        "/v1/reports",
        "/v1/settlements",
        "/v1/events",
        "/v1/subscriptions",
        "/v1/work-records",
    }
)


def client_address(request: Request[Any, Any, Any]) -> str:
    """The address a write is charged to (read from the scope: ``request.client`` builds an object)."""
    return address_of(request.scope)


def address_of(scope: Scope) -> str:
    """The client address of an ASGI connection's ``scope``."""
    client = scope.get("client")
    return client[0] if client else "unknown"


def refuse_cross_origin(request: Request[Any, Any, Any]) -> None:
    """Refuse a write a web browser sends: one with an ``Origin`` or ``Sec-Fetch-Site`` header. The
    server sends no CORS headers, so a page of another origin never reads an answer, but a POST without a
    preflight (text/plain, or no Content-Type) was still carried out: any site could spread pre-signed
    statements over its visitors' addresses, past the per-address write limits. Comparing ``Origin`` with
    ``Host`` is not enough: a page on a name rebound to the server's address (DNS rebinding) is
    same-origin to the browser (found by review). Programs (the SDK, the CLI, curl) send neither header,
    and no page of the service writes."""
    headers = request.headers
    if "origin" in headers or "sec-fetch-site" in headers:
        where = headers.get("origin") or headers.get("sec-fetch-site") or ""
        raise Forbidden(
            f"writes from web pages are refused (origin {where[:100]}); sign and send them from a program"
        )
