"""Who a write is charged to: the client address, and which routes charge it per entry written."""

from __future__ import annotations

from typing import Any

from litestar import Request

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
    client = request.scope.get("client")
    return client[0] if client else "unknown"


def refuse_cross_origin(request: Request[Any, Any, Any]) -> None:
    """Refuse a write a browser sends for a page of another origin (its ``Origin`` header names another
    host, or ``null``). The server sends no CORS headers, so such a page never reads an answer, but a
    POST without a preflight (text/plain, or no Content-Type) was still carried out: any site could spread
    pre-signed statements over its visitors' addresses, past the per-address write limits. Programs (the
    SDK, the CLI, curl) send no Origin; the scheme is not compared, as behind a TLS-terminating proxy."""
    origin = request.headers.get("origin")
    if origin is None:
        return
    host = request.headers.get("host", "")
    if origin == "null" or origin.partition("://")[2].rstrip("/").lower() != host.lower():
        raise Forbidden(f"writes from pages of another origin ({origin[:100]}) are refused")
