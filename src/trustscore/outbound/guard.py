"""Safe outbound HTTP for calling endpoints that agents declare (re-verification).

An agent's endpoint is untrusted input: it may point at the server's own loopback, the private network
or the cloud metadata address, redirect there, hang, or stream gigabytes. The clients made here resolve
each host once, refuse the connection unless *every* address is allowed by an :class:`OutboundPolicy`,
connect to an address they checked (so DNS rebinding cannot swap it), bound every phase by a timeout
and the whole call by a wall-clock limit, cap the body, and never leave the host on a redirect.
Design notes and what the guard does not cover: docs/outbound.md.
"""

from __future__ import annotations

import contextlib
import contextvars
import http.cookiejar
import ipaddress
import json
import logging
import socket
import ssl
import threading
import time
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import httpcore
import httpx

from trustscore.errors import ConfigError, InvalidInput, TrustscoreError

IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

log = logging.getLogger(__name__)
_DEFAULT_PORTS = {"http": 80, "https": 443}


class OutboundRefused(InvalidInput):
    """The policy forbids this target: its scheme, credentials, port, address or a redirect."""

    code = "outbound-refused"
    status = 400
    title = "Outbound request refused"


class OutboundFailed(TrustscoreError):
    """The target is down, slow, too big or answered garbage; record it and move on."""

    code = "outbound-failed"
    status = 502
    title = "Outbound request failed"


@dataclass(frozen=True)
class OutboundPolicy:
    """What outbound calls may reach and how long and how much they may take (seconds, bytes).

    Loopback, private (RFC 1918, CGNAT 100.64/10, ULA fc00::/7) and link-local (169.254/16 with the
    cloud metadata address, fe80::/10) targets are refused unless allowed; unspecified, multicast,
    broadcast and reserved addresses are always refused. ``allowed_ports=None`` allows any port.
    """

    connect_timeout: float = 5.0
    read_timeout: float = 30.0
    total_timeout: float = 60.0
    max_response_bytes: int = 1024 * 1024
    max_redirects: int = 0
    allow_loopback: bool = False
    allow_private: bool = False
    allow_link_local: bool = False
    allowed_ports: frozenset[int] | None = None

    def __post_init__(self) -> None:
        if min(self.connect_timeout, self.read_timeout, self.total_timeout) <= 0:
            raise ConfigError("outbound timeouts must be positive")
        if self.max_response_bytes <= 0 or self.max_redirects < 0:
            raise ConfigError("outbound max_response_bytes must be positive and max_redirects >= 0")
        if self.allowed_ports is not None and not all(0 < p < 65536 for p in self.allowed_ports):
            raise ConfigError("outbound allowed_ports must be TCP ports (1-65535)")

    def timeout(self) -> httpx.Timeout:
        return httpx.Timeout(
            connect=self.connect_timeout,
            read=self.read_timeout,
            write=self.read_timeout,
            pool=self.connect_timeout,
        )


# ---- address classification (pure) ------------------------------------------------------------------

_V4 = [
    (ipaddress.IPv4Network(net), kind)
    for net, kind in [
        ("0.0.0.0/8", "unspecified"),
        ("127.0.0.0/8", "loopback"),
        ("10.0.0.0/8", "private"),
        ("172.16.0.0/12", "private"),
        ("192.168.0.0/16", "private"),
        ("100.64.0.0/10", "private"),  # CGNAT shared address space
        ("169.254.0.0/16", "link-local"),  # includes 169.254.169.254, the cloud metadata service
        ("224.0.0.0/4", "multicast"),
        ("255.255.255.255/32", "broadcast"),
        ("240.0.0.0/4", "reserved"),
        ("192.0.0.0/24", "reserved"),
        ("192.0.2.0/24", "reserved"),
        ("198.51.100.0/24", "reserved"),
        ("203.0.113.0/24", "reserved"),
        ("198.18.0.0/15", "reserved"),
        ("192.88.99.0/24", "reserved"),
    ]
]
_V6 = [
    (ipaddress.IPv6Network(net), kind)
    for net, kind in [
        ("::/128", "unspecified"),
        ("::1/128", "loopback"),
        ("fe80::/10", "link-local"),
        ("fc00::/7", "private"),  # unique local addresses
        ("fec0::/10", "private"),  # deprecated site-local
        ("64:ff9b:1::/48", "private"),  # local-use NAT64
        ("ff00::/8", "multicast"),
        ("::/8", "reserved"),  # includes deprecated IPv4-compatible ::a.b.c.d
        ("100::/64", "reserved"),
        ("2001::/23", "reserved"),  # includes Teredo
        ("2001:db8::/32", "reserved"),
        ("3fff::/20", "reserved"),
        ("5f00::/16", "reserved"),
    ]
]
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")
_ALWAYS_REFUSED = {"unspecified", "multicast", "broadcast", "reserved"}


def embedded_v4(ip: ipaddress.IPv6Address) -> ipaddress.IPv4Address | None:
    """The IPv4 address an IPv6 address reaches: IPv4-mapped, well-known NAT64 or 6to4 (also what the
    per-address allowances charge such a client as, api/addresses.py)."""
    if ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    if ip in _NAT64:
        return ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    return ip.sixtofour


def classify(ip: IPAddress) -> str | None:
    """The class of a non-public address ("loopback", "private", "link-local", "unspecified",
    "multicast", "broadcast", "reserved"), or None for a public one. IPv6 forms that carry an IPv4
    address (``::ffff:127.0.0.1``, NAT64, 6to4) are classified by that address."""
    table: Sequence[tuple[ipaddress.IPv4Network | ipaddress.IPv6Network, str]] = _V4
    if isinstance(ip, ipaddress.IPv6Address):
        inner = embedded_v4(ip)
        if inner is not None:
            return classify(inner)
        table = _V6
    for net, kind in table:
        if ip in net:
            return kind
    return None if ip.is_global else "reserved"


def refusal(ip: IPAddress, policy: OutboundPolicy) -> str | None:
    """Why ``policy`` refuses ``ip`` (e.g. "a loopback address"), or None if it may be reached."""
    kind = classify(ip)
    allowed = {
        None: True,
        "loopback": policy.allow_loopback,
        "private": policy.allow_private,
        "link-local": policy.allow_link_local,
    }
    if kind not in _ALWAYS_REFUSED and allowed[kind]:
        return None
    return f"{'an' if kind == 'unspecified' else 'a'} {kind} address"


def _describe(host: str, ip: IPAddress, reason: str) -> str:
    """Why ``host`` is refused. For a name, not the address it resolves to: the refusal reaches whoever
    asked (a webhook subscription's sender, a card's endpoint), and naming the address would map the
    server's internal names to internal addresses for anyone (found by review, 2026-12-07)."""
    inner = embedded_v4(ip) if isinstance(ip, ipaddress.IPv6Address) else None
    via = f" (it reaches {inner})" if inner is not None else ""
    if _literal(host) == ip:
        return f"refused: {ip} is {reason}{via}"
    if not _numeric(host):
        return f"refused: {host} resolves to {reason}"
    return f"refused: {host} resolves to {ip}, {reason}{via}"


def _numeric(host: str) -> bool:
    """An IPv4 address in a form other than dotted decimal ("2130706433", "0x7f.1", "127.1"): the address
    it stands for is no secret."""
    try:
        socket.inet_aton(host)
    except (OSError, UnicodeEncodeError, ValueError):
        return False
    return True


def vet_addresses(host: str, port: int, ips: Iterable[IPAddress], policy: OutboundPolicy) -> list[IPAddress]:
    """The distinct addresses in resolution order, or OutboundRefused if the port or any address is not
    allowed (one bad address refuses the host: a resolver may answer differently next time)."""
    _check_port(port, policy)
    seen = list(dict.fromkeys(ips))
    if not seen:
        raise OutboundFailed(f"{host} resolves to no address")
    for ip in seen:
        reason = refusal(ip, policy)
        if reason is not None:
            if _literal(host) != ip:  # the message may not name it; the operator's log does
                log.info("outbound refused: %s resolves to %s, %s", host, ip, reason)
            raise OutboundRefused(_describe(host, ip, reason))
    return seen


def _check_port(port: int, policy: OutboundPolicy) -> None:
    if policy.allowed_ports is not None and port not in policy.allowed_ports:
        raise OutboundRefused(f"refused: port {port} is not an allowed port")


def _literal(host: str) -> IPAddress | None:
    try:
        return ipaddress.ip_address(host.strip("[]").replace("%25", "%"))
    except ValueError:
        return None


def _where(url: httpx.URL) -> str:
    """The URL for messages: no credentials, no query (it may hold secrets)."""
    return f"{url.scheme}://{url.netloc.decode('ascii', 'replace').rpartition('@')[2]}{url.path}"


def _origin(url: httpx.URL) -> tuple[str, str, int | None]:
    return url.scheme, url.host.rstrip(".").lower(), url.port or _DEFAULT_PORTS.get(url.scheme)


def _check_target(url: httpx.URL, policy: OutboundPolicy) -> None:
    if url.scheme not in _DEFAULT_PORTS:
        raise OutboundRefused(f"refused: scheme {url.scheme!r} is not http or https")
    if url.userinfo:
        raise OutboundRefused("refused: credentials in the URL are not allowed")
    if not url.host:
        raise OutboundRefused("refused: the URL has no host")
    _check_port(url.port or _DEFAULT_PORTS[url.scheme], policy)


def _parse(url: str | httpx.URL) -> httpx.URL:
    try:
        return httpx.URL(url)
    except httpx.InvalidURL as exc:
        raise OutboundRefused(f"refused: not a valid URL ({_one_line(exc)})") from exc


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text[:200]


# ---- resolution: once per connection, bounded by the connect timeout --------------------------------


def _addresses(infos: list[Any]) -> list[IPAddress]:
    return [ipaddress.ip_address(info[4][0]) for info in infos]


def _resolve(host: str, port: int, timeout: float) -> list[IPAddress]:
    """Resolve in a daemon thread so a stuck resolver costs at most ``timeout`` (the thread is
    abandoned). Numeric hosts in any form (``2130706433``, ``0x7f.1``) come back normalised."""
    literal = _literal(host)
    if literal is not None:
        return [literal]
    box: dict[str, Any] = {}

    def run() -> None:
        try:
            box["infos"] = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except (OSError, UnicodeError) as exc:
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True, name="outbound-resolve")
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise OutboundFailed(f"cannot resolve {host} within {timeout:g} s")
    if "error" in box:
        raise OutboundFailed(f"cannot resolve {host}: {_one_line(box['error'])}")
    return _addresses(box["infos"])


def check_url(url: str | httpx.URL, policy: OutboundPolicy) -> list[IPAddress]:
    """Validate ``url`` (scheme, credentials, port) and resolve its host; return the addresses it
    resolves to, or raise OutboundRefused (policy) / OutboundFailed (cannot resolve). Advisory: the
    clients below check again at connect time, against the address they actually connect to."""
    parsed = _parse(url)
    _check_target(parsed, policy)
    port = parsed.port or _DEFAULT_PORTS[parsed.scheme]
    return vet_addresses(parsed.host, port, _resolve(parsed.host, port, policy.connect_timeout), policy)


# ---- the whole-call deadline, seen by every socket operation of one request --------------------------

_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("outbound_deadline", default=None)


@contextlib.contextmanager
def _within(total: float) -> Iterator[None]:
    """Set the deadline for everything inside: ``total`` seconds from now, or an outer one if sooner
    (so a chain of redirects shares one limit)."""
    mine = time.monotonic() + total
    outer = _DEADLINE.get()
    token = _DEADLINE.set(mine if outer is None else min(outer, mine))
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _budget(timeout: float | None, late: type[Exception]) -> float | None:
    """``timeout`` cut to what is left of the current call's total time; raise ``late`` if none is."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise late("total time limit reached")
    return left if timeout is None else min(timeout, left)


class _Stream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _budget(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _budget(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        budget = _budget(timeout, httpcore.ConnectTimeout)
        return _Stream(self._inner.start_tls(ssl_context, server_hostname, budget))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


def _connect_budget(timeout: float | None, policy: OutboundPolicy) -> float:
    budget = _budget(timeout, httpcore.ConnectTimeout)
    return policy.connect_timeout if budget is None else budget


class _Backend(httpcore.NetworkBackend):
    """httpcore asks this for every new connection; the URL, Host header and TLS server name keep the
    original host name, only the socket goes to the address that was checked."""

    def __init__(self, policy: OutboundPolicy) -> None:
        self._policy = policy
        self._inner = httpcore.SyncBackend()

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        deadline = time.monotonic() + _connect_budget(timeout, self._policy)
        ips = vet_addresses(host, port, _resolve(host, port, deadline - time.monotonic()), self._policy)
        failure: Exception = httpcore.ConnectTimeout(f"cannot connect to {host} in time")
        for ip in ips:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            try:
                return _Stream(self._inner.connect_tcp(str(ip), port, left, local_address, socket_options))
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        raise failure

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        raise OutboundRefused("refused: unix sockets are not allowed")

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


def _before(request: httpx.Request, policy: OutboundPolicy) -> None:
    _check_target(request.url, policy)
    # Compressed bodies could expand far past the size limit once decoded; ask for none.
    request.headers["Accept-Encoding"] = "identity"


def _after_headers(request: httpx.Request, response: httpx.Response, policy: OutboundPolicy) -> None:
    """Refuse a redirect off the host; fail early on a declared oversize or compressed body."""
    where = _where(request.url)
    if response.has_redirect_location:
        try:
            target = request.url.join(response.headers["Location"])
        except httpx.InvalidURL as exc:
            raise OutboundFailed(f"{where} redirects to an invalid URL") from exc
        if _origin(target) != _origin(request.url):
            raise OutboundRefused(
                f"refused: {where} redirects to another host ({_where(target)}); "
                "only same-host redirects may be followed"
            )
    declared = response.headers.get("Content-Length", "")
    if declared.isascii() and declared.isdigit() and int(declared) > policy.max_response_bytes:
        raise OutboundFailed(f"{where} declares a {declared}-byte response, over {policy.max_response_bytes}")
    encoding = response.headers.get("Content-Encoding", "identity").strip().lower()
    if encoding not in ("", "identity"):
        raise OutboundFailed(f"{where} sent a {encoding}-encoded response though none was asked for")


def _grow(body: bytearray, chunk: bytes, request: httpx.Request, policy: OutboundPolicy) -> None:
    body += chunk
    if len(body) > policy.max_response_bytes:
        raise OutboundFailed(f"{_where(request.url)} sent more than {policy.max_response_bytes} bytes")


def _buffered(response: httpx.Response, body: bytearray) -> httpx.Response:
    return httpx.Response(
        response.status_code,
        headers=response.headers,
        stream=httpx.ByteStream(bytes(body)),
        extensions=response.extensions,
    )


class GuardedTransport(httpx.HTTPTransport):
    """An httpx transport enforcing an :class:`OutboundPolicy`. The body is read (up to the limit)
    inside the transport, so the total time limit covers it and callers get a complete response."""

    def __init__(self, policy: OutboundPolicy, *, verify: ssl.SSLContext | bool = True) -> None:
        ssl_context = httpx.create_ssl_context(verify=verify, trust_env=False)
        super().__init__(verify=ssl_context, trust_env=False)
        self.policy = policy
        self._pool = httpcore.ConnectionPool(
            ssl_context=ssl_context, http1=True, http2=False, network_backend=_Backend(policy)
        )

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        _before(request, self.policy)
        body = bytearray()
        with _within(self.policy.total_timeout):
            response = super().handle_request(request)
            stream = response.stream
            assert isinstance(stream, httpx.SyncByteStream)
            try:
                _after_headers(request, response, self.policy)
                for chunk in stream:
                    _grow(body, chunk, request, self.policy)
            finally:
                stream.close()
        return _buffered(response, body)


# ---- clients and the one call the server makes ---------------------------------------------------------


def _client_options(policy: OutboundPolicy) -> dict[str, Any]:
    """Nothing from the environment (an env proxy would resolve and connect for us, past the guard),
    a cookie jar that keeps nothing (one endpoint must not plant state for the next; a CookieJar,
    since httpx.Cookies would be copied into a default jar), the policy's timeouts and redirects."""
    no_cookies = http.cookiejar.DefaultCookiePolicy(allowed_domains=[])
    return {
        "trust_env": False,
        "cookies": http.cookiejar.CookieJar(policy=no_cookies),
        "timeout": policy.timeout(),
        "follow_redirects": policy.max_redirects > 0,
        "max_redirects": policy.max_redirects,
    }


class SafeClient(httpx.Client):
    """An httpx.Client that only talks through a :class:`GuardedTransport`: no proxies or settings from
    the environment, no cookies, the policy's timeouts, and same-host redirects only if the policy
    allows them."""

    def __init__(self, policy: OutboundPolicy, *, verify: ssl.SSLContext | bool = True) -> None:
        super().__init__(transport=GuardedTransport(policy, verify=verify), **_client_options(policy))
        self.policy = policy


def safe_client(policy: OutboundPolicy, *, verify: ssl.SSLContext | bool = True) -> SafeClient:
    """A synchronous client enforcing ``policy`` (``verify``: an SSL context for private CAs)."""
    return SafeClient(policy, verify=verify)


def _require(client: SafeClient, policy: OutboundPolicy) -> None:
    if not isinstance(client, SafeClient):
        raise ConfigError(f"outbound calls need a client from safe_client(), not {type(client).__name__}")
    if client.policy != policy:
        raise ConfigError("the outbound policy differs from the one the client was made with")


def _failure(where: str, exc: httpx.HTTPError, policy: OutboundPolicy) -> OutboundFailed:
    if isinstance(exc, httpx.TimeoutException):
        limits = (
            f"connect {policy.connect_timeout:g} s, read {policy.read_timeout:g} s, "
            f"total {policy.total_timeout:g} s"
        )
        return OutboundFailed(f"{where}: no answer within the time limits ({limits})")
    if isinstance(exc, httpx.TooManyRedirects):
        return OutboundFailed(f"{where}: more than {policy.max_redirects} redirects")
    return OutboundFailed(f"{where}: {type(exc).__name__}: {_one_line(exc)}")


def _json_body(where: str, response: httpx.Response) -> Any:
    if response.has_redirect_location:
        location = _where(response.url.join(response.headers["Location"]))
        raise OutboundRefused(f"refused: {where} redirects to {location}; redirects are not followed")
    if not 200 <= response.status_code < 300:
        raise OutboundFailed(f"{where} answered HTTP {response.status_code}")
    try:
        return json.loads(response.content)
    except (ValueError, RecursionError) as exc:
        raise OutboundFailed(f"{where} answered something that is not JSON") from exc


def post_json(
    client: SafeClient,
    url: str,
    payload: Any,
    policy: OutboundPolicy,
    *,
    headers: dict[str, str] | None = None,
) -> Any:
    """POST ``payload`` as JSON to ``url`` and return the decoded JSON answer (a 2xx response).

    Raises OutboundRefused when the policy forbids the target or a redirect, OutboundFailed when the
    endpoint is down, slow, too big or answers a non-2xx status or something that is not JSON.
    """
    _require(client, policy)
    target = _parse(url)
    try:
        with _within(policy.total_timeout):
            response = client.post(target, json=payload, headers=headers)
    except httpx.HTTPError as exc:
        raise _failure(_where(target), exc, policy) from exc
    return _json_body(_where(target), response)


def post_bytes(
    client: SafeClient, url: str, body: bytes, policy: OutboundPolicy, *, headers: dict[str, str]
) -> int:
    """POST ``body`` as it is (signed bytes: webhooks) to ``url`` within the policy's total time; return
    the HTTP status, whatever it is. Raises OutboundRefused when the policy forbids the target or a
    redirect, OutboundFailed when the target is down, slow or too big."""
    _require(client, policy)
    target = _parse(url)
    try:
        with _within(policy.total_timeout):
            response = client.post(target, content=body, headers=headers)
    except httpx.HTTPError as exc:
        raise _failure(_where(target), exc, policy) from exc
    if response.has_redirect_location:
        raise OutboundRefused(f"refused: {_where(target)} redirects; redirects are not followed")
    return response.status_code
