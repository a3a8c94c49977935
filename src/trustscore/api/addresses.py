"""Who a write is charged to: the client address, and which routes charge it per entry written."""

from __future__ import annotations

from typing import Any

from litestar import Request

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
