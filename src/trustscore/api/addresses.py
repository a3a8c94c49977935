"""Who a write is charged to: the client address, and which routes charge it per entry written."""

from __future__ import annotations

import functools
import ipaddress
from typing import Any

from litestar import Request
from litestar.connection import ASGIConnection
from litestar.handlers import BaseRouteHandler
from litestar.types import Guard, Scope

from trustscore.errors import Forbidden
from trustscore.outbound.guard import embedded_v4
from trustscore.services.ratelimit import KeyRateLimiter

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
    of its network; an IPv6 address that carries an IPv4 client's address as that IPv4 address:
    IPv4-mapped (``::ffff:192.0.2.1``), the well-known NAT64 prefix (``64:ff9b::/96``, a translator in
    front of an IPv6-only server: its /64 would put every IPv4 client in one bucket), 6to4 (``2002::/16``:
    one IPv4 address owns a /48 of it, 65,536 /64s), Teredo (the client's, not its relay's), and the rest
    of ``::/64`` (IPv4-compatible ``::192.0.2.1``, IPv4-translated ``::ffff:0:192.0.2.1``) by its last 32
    bits; ``::1`` and ``::`` are themselves. Anything else (a Unix socket's name, a test client's) is
    charged as itself. A translator with a prefix of its own is not recognised: its clients share its /64
    (bound them at the translator, or serve its IPv4 clients apart)."""
    if ":" not in host or len(host) > _MAX_ADDRESS:  # IPv4, or not an address: no parsing
        return host
    return _ipv6_network(host)


@functools.lru_cache(maxsize=4096)  # parsing and printing an IPv6 address costs ~13 µs
def _ipv6_network(host: str) -> str:
    try:
        ip = ipaddress.IPv6Address(host)
    except ValueError:
        return host
    inner = embedded_v4(ip) or (ip.teredo[1] if ip.teredo else None)
    if inner is not None:
        return str(inner)
    if int(ip) >> _HOST_BITS == 0:  # ::/64: unspecified, loopback, else IPv4-compatible or -translated
        return str(ip) if int(ip) <= 1 else str(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return f"{ipaddress.IPv6Address(int(ip) >> _HOST_BITS << _HOST_BITS)}/{IPV6_PREFIX}"


def posts_charged(per_address: KeyRateLimiter) -> Guard:
    """A guard charging each POST one token of its client's allowance (429 when none is left), for the
    ASGI mounts (``/mcp``, ``/a2a/``), which the app's before-request hook that charges every other POST
    never sees: their tools were callable without bound (a bundle's verification is hundreds of
    milliseconds of CPU)."""

    def charge(connection: ASGIConnection[Any, Any, Any, Any], _: BaseRouteHandler) -> None:
        if connection.scope.get("method") == "POST":
            per_address.take(address_of(connection.scope))

    return charge


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
