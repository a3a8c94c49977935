"""Who a write is charged to: the client address, and which routes charge it per entry written."""

from __future__ import annotations

import functools
import ipaddress
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
    """What an ASGI connection's ``scope`` is charged as: its client's :func:`network_of`."""
    client = scope.get("client")
    return network_of(client[0]) if client else "unknown"


#: The prefix an IPv6 client is charged as: the /64 a single host or site is commonly given (RFC 6177).
IPV6_PREFIX = 64
_HOST_BITS = 128 - IPV6_PREFIX
#: Longer than any IPv6 address with a zone (45 characters and an interface name): not parsed, not kept.
_MAX_ADDRESS = 64


def network_of(host: str) -> str:
    """What the per-address allowances charge a client ``host`` as: an IPv4 address itself; an IPv6
    address as its /64 (``2001:db8:0:1::/64``), since one host may send each request from another address
    of its network; an IPv4-mapped IPv6 address (``::ffff:192.0.2.1``) as the IPv4 address it carries.
    Anything else (a Unix socket's name, a test client's) is charged as itself."""
    if ":" not in host or len(host) > _MAX_ADDRESS:  # IPv4, or not an address: no parsing
        return host
    return _ipv6_network(host)


@functools.lru_cache(maxsize=4096)  # parsing and printing an IPv6 address costs ~13 µs
def _ipv6_network(host: str) -> str:
    try:
        ip = ipaddress.IPv6Address(host)
    except ValueError:
        return host
    if ip.ipv4_mapped is not None:
        return str(ip.ipv4_mapped)
    return f"{ipaddress.IPv6Address(int(ip) >> _HOST_BITS << _HOST_BITS)}/{IPV6_PREFIX}"


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
