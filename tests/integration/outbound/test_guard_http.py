"""The outbound guard against real HTTP servers on 127.0.0.1: loopback is refused unless allowed, redirects
never leave the host, and a slow, huge or garbage endpoint is a quick, clean OutboundFailed."""

from __future__ import annotations

import contextlib
import datetime
import gzip
import http.server
import json
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, urlsplit

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from trustscore.errors import ConfigError
from trustscore.outbound.guard import (
    OutboundFailed,
    OutboundPolicy,
    OutboundRefused,
    post_json,
    safe_client,
)

LOOPBACK = OutboundPolicy(allow_loopback=True)
TEN_MB = 10 * 1024 * 1024


class Handler(http.server.BaseHTTPRequestHandler):
    """Routes by path: /json, /garbage?body=..., /status?code=, /redirect?to=&code=, /slow, /drip, /big,
    /big-declared, /gzip. Every request is recorded on the server."""

    server: Server

    def do_GET(self) -> None:
        self._route()

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self._route()

    def _route(self) -> None:
        url = urlsplit(self.path)
        query = {k: v[0] for k, v in parse_qs(url.query, keep_blank_values=True).items()}
        self.server.hits.append((self.command, self.path, dict(self.headers)))
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            getattr(self, "route_" + url.path.strip("/").replace("-", "_"))(query)

    def _send(self, code: int, body: bytes, **headers: str) -> None:
        self.send_response(code)
        for name, value in {"Content-Length": str(len(body)), **headers}.items():
            self.send_header(name.replace("_", "-"), value)
        self.end_headers()
        self.wfile.write(body)

    def route_json(self, q: dict[str, str]) -> None:
        self._send(
            200, json.dumps({"output": "ok", "host": self.headers["Host"], "path": self.path}).encode()
        )

    def route_garbage(self, q: dict[str, str]) -> None:
        body = q.get("body", "").encode("latin-1") * int(q.get("times", "1"))
        self._send(200, body, Content_Type="application/json")

    def route_status(self, q: dict[str, str]) -> None:
        self._send(int(q["code"]), b'{"error": "nope"}')

    def route_redirect(self, q: dict[str, str]) -> None:
        self._send(int(q.get("code", "307")), b"", Location=q["to"])

    def route_slow(self, q: dict[str, str]) -> None:
        time.sleep(float(q.get("s", "5")))
        self._send(200, b'{"output": "late"}')

    def route_drip(self, q: dict[str, str]) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "100000")
        self.end_headers()
        for _ in range(200):  # a byte every 50 ms: never idle long enough for the read timeout
            self.wfile.write(b" ")
            self.wfile.flush()
            time.sleep(0.05)

    def route_big(self, q: dict[str, str]) -> None:
        self.send_response(200)
        self.end_headers()  # no length: the body runs until the connection closes (HTTP/1.0)
        chunk = b"x" * 65536
        for _ in range(TEN_MB // len(chunk)):
            self.wfile.write(chunk)

    def route_big_declared(self, q: dict[str, str]) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(TEN_MB))
        self.end_headers()
        self.wfile.write(b"x" * TEN_MB)

    def route_cookie(self, q: dict[str, str]) -> None:
        self._send(
            200, json.dumps({"seen": self.headers.get("Cookie")}).encode(), Set_Cookie="sid=planted; Path=/"
        )

    def route_gzip(self, q: dict[str, str]) -> None:
        self._send(200, gzip.compress(b"[" + b"0," * 100000 + b"0]"), Content_Encoding="gzip")

    def log_message(self, format: str, *args: Any) -> None:
        pass


class Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.hits: list[tuple[str, str, dict[str, str]]] = []
        if tls is not None:
            self.socket = tls.wrap_socket(self.socket, server_side=True)
        self.scheme = "https" if tls else "http"

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def url(self, path: str, host: str = "127.0.0.1") -> str:
        return f"{self.scheme}://{host}:{self.port}{path}"


def _serving(tls: ssl.SSLContext | None = None) -> Iterator[Server]:
    server = Server(tls)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def server() -> Iterator[Server]:
    yield from _serving()


@pytest.fixture
def other() -> Iterator[Server]:
    """A second server: another port is another host as far as redirects go."""
    yield from _serving()


def _call(policy: OutboundPolicy, url: str, **kw: Any) -> Any:
    with safe_client(policy, **kw) as client:
        return post_json(client, url, {"q": "hi"}, policy)


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_loopback_is_refused_by_default_before_any_connection(server: Server) -> None:
    with pytest.raises(OutboundRefused, match=r"^refused: 127\.0\.0\.1 is a loopback address$"):
        _call(OutboundPolicy(), server.url("/json"))
    with pytest.raises(OutboundRefused, match="loopback"):
        _call(OutboundPolicy(allow_private=True, allow_link_local=True), server.url("/json"))
    assert server.hits == []


def test_loopback_is_reached_when_the_operator_allows_it(server: Server) -> None:
    answer = _call(LOOPBACK, server.url("/json"))
    assert answer["output"] == "ok"
    assert answer["host"] == f"127.0.0.1:{server.port}"
    assert server.hits[0][2]["Accept-Encoding"] == "identity"


@pytest.mark.parametrize("host", ["localhost", "2130706433", "0x7f.1", "127.1", "[::ffff:127.0.0.1]"])
def test_names_and_numeric_forms_are_checked_after_resolution(server: Server, host: str) -> None:
    """The check runs on what the host resolves to, so a name or odd form of 127.0.0.1 is loopback."""
    with pytest.raises(OutboundRefused, match="a loopback address"):
        _call(OutboundPolicy(), server.url("/json", host))
    assert server.hits == []
    answer = _call(LOOPBACK, server.url("/json", host))
    assert answer["host"] == f"{host}:{server.port}"  # the Host header keeps the name as written


@pytest.mark.parametrize("max_redirects", [0, 5])
def test_a_redirect_to_another_host_is_refused(server: Server, other: Server, max_redirects: int) -> None:
    policy = OutboundPolicy(allow_loopback=True, max_redirects=max_redirects)
    for target in [other.url("/json"), server.url("/json", "localhost"), "http://169.254.169.254/latest/"]:
        with pytest.raises(OutboundRefused, match="redirects to another host"):
            _call(policy, server.url(f"/redirect?to={target}"))
    with pytest.raises(OutboundRefused, match="redirects to another host"):
        _call(policy, server.url(f"/redirect?to=https://127.0.0.1:{server.port}/json"))  # scheme change
    assert other.hits == []


def test_same_host_redirects_are_followed_only_when_enabled(server: Server) -> None:
    url = server.url("/redirect?to=/json%3Fhop%3D1")
    with pytest.raises(OutboundRefused, match="redirects are not followed"):
        _call(LOOPBACK, url)
    answer = _call(OutboundPolicy(allow_loopback=True, max_redirects=1), url)
    assert answer["path"] == "/json?hop=1"
    assert [hit[0] for hit in server.hits] == ["POST", "POST", "POST"]  # 307 keeps the method

    chain = server.url("/redirect?to=/redirect%3Fto%3D/json")
    with pytest.raises(OutboundFailed, match="more than 1 redirects"):
        _call(OutboundPolicy(allow_loopback=True, max_redirects=1), chain)
    assert _call(OutboundPolicy(allow_loopback=True, max_redirects=2), chain)["output"] == "ok"


def test_a_slow_server_fails_within_the_read_timeout(server: Server) -> None:
    started = time.monotonic()
    with pytest.raises(OutboundFailed, match=r"no answer within the time limits \(connect 5 s, read 0\.5 s"):
        _call(OutboundPolicy(allow_loopback=True, read_timeout=0.5), server.url("/slow"))
    assert time.monotonic() - started < 10


def test_a_dripping_server_fails_within_the_total_timeout(server: Server) -> None:
    """A byte every 50 ms never trips the read timeout; the wall-clock limit still ends the call."""
    started = time.monotonic()
    with pytest.raises(OutboundFailed, match="no answer within"):
        _call(OutboundPolicy(allow_loopback=True, read_timeout=5, total_timeout=1), server.url("/drip"))
    assert time.monotonic() - started < 4


def test_a_10_mb_stream_is_cut_off_at_the_limit(server: Server) -> None:
    started = time.monotonic()
    with pytest.raises(OutboundFailed, match="sent more than 1048576 bytes"):
        _call(LOOPBACK, server.url("/big"))
    with pytest.raises(OutboundFailed, match="declares a 10485760-byte response, over 65536"):
        _call(OutboundPolicy(allow_loopback=True, max_response_bytes=65536), server.url("/big-declared"))
    assert time.monotonic() - started < 10


def test_a_compressed_body_is_refused_before_it_can_expand(server: Server) -> None:
    with pytest.raises(OutboundFailed, match="gzip-encoded response"):
        _call(LOOPBACK, server.url("/gzip"))


@pytest.mark.parametrize(
    ("body", "times"),
    [("this is not json", 1), ('{"output": ', 1), ("\xff\xfe\x00garbage", 1), ("[", 100000), ("", 1)],
)
def test_garbage_is_a_clean_failure(server: Server, body: str, times: int) -> None:
    with pytest.raises(OutboundFailed, match=r"answered something that is not JSON$") as info:
        _call(LOOPBACK, server.url(f"/garbage?body={quote(body, safe='')}&times={times}"))
    assert "\n" not in info.value.message


@pytest.mark.parametrize("code", [204, 404, 500, 503])
def test_a_bad_status_is_a_failure(server: Server, code: int) -> None:
    with pytest.raises(OutboundFailed, match=f"answered (HTTP {code}|something that is not JSON)"):
        _call(LOOPBACK, server.url(f"/status?code={code}"))


def test_a_down_endpoint_is_a_quick_failure() -> None:
    started = time.monotonic()
    with pytest.raises(OutboundFailed, match="ConnectError") as info:
        _call(LOOPBACK, f"http://127.0.0.1:{_closed_port()}/agent?key=secret")
    assert "secret" not in info.value.message  # the query (maybe a key) stays out of the record
    assert time.monotonic() - started < 10


def test_proxies_from_the_environment_are_ignored(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "all_proxy"):
        monkeypatch.setenv(name, f"http://127.0.0.1:{_closed_port()}")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert _call(LOOPBACK, server.url("/json"))["output"] == "ok"


def test_the_guard_holds_for_direct_client_use(server: Server, other: Server) -> None:
    """The checks live in the transport, so plain client.get/post get them too."""
    with safe_client(OutboundPolicy()) as client, pytest.raises(OutboundRefused, match="loopback"):
        client.get(server.url("/json"))
    with safe_client(LOOPBACK) as client:
        with pytest.raises(OutboundRefused, match="another host"):
            client.get(server.url(f"/redirect?to={other.url('/json')}"), follow_redirects=True)
        with pytest.raises(OutboundFailed, match="sent more than"):
            client.get(server.url("/big"))
        assert client.get(server.url("/json")).json()["output"] == "ok"
    assert other.hits == []


def test_cookies_are_not_kept_between_calls(server: Server) -> None:
    with safe_client(LOOPBACK) as client:
        assert post_json(client, server.url("/cookie"), {}, LOOPBACK) == {"seen": None}
        assert post_json(client, server.url("/cookie"), {}, LOOPBACK) == {"seen": None}


def test_post_json_needs_the_matching_safe_client(server: Server) -> None:
    with httpx.Client() as plain, pytest.raises(ConfigError, match="safe_client"):
        post_json(plain, server.url("/json"), {}, LOOPBACK)  # type: ignore[arg-type]
    with safe_client(LOOPBACK) as client, pytest.raises(ConfigError, match="differs"):
        post_json(client, server.url("/json"), {}, OutboundPolicy())
    assert server.hits == []


# ---- TLS: the socket goes to the checked address, the certificate is checked against the name ------------


def _certificates(tmp: Path) -> tuple[Path, Path, Path]:
    """A private CA and a server certificate for DNS:localhost only (no IP address)."""
    now = datetime.datetime.now(datetime.UTC)

    def cert(
        subject: str,
        key: ec.EllipticCurvePrivateKey,
        issuer: str,
        signer: ec.EllipticCurvePrivateKey,
        ca: bool,
    ) -> x509.Certificate:
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]))
            .issuer_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer)]))
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        )
        if ca:
            usage = x509.KeyUsage(False, False, False, False, False, True, True, False, False)
            builder = builder.add_extension(usage, critical=True).add_extension(
                x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False
            )
        else:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.DNSName("localhost")]), critical=False
            ).add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(signer.public_key()), critical=False
            )
        return builder.sign(signer, hashes.SHA256())

    ca_key, leaf_key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    paths = tmp / "ca.pem", tmp / "leaf.pem", tmp / "leaf.key"
    paths[0].write_bytes(
        cert("test CA", ca_key, "test CA", ca_key, True).public_bytes(serialization.Encoding.PEM)
    )
    paths[1].write_bytes(
        cert("localhost", leaf_key, "test CA", ca_key, False).public_bytes(serialization.Encoding.PEM)
    )
    paths[2].write_bytes(
        leaf_key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return paths


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[Server, ssl.SSLContext, list[str | None]]]:
    ca, leaf, key = _certificates(tmp_path)
    names: list[str | None] = []
    server_ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server_ctx.load_cert_chain(leaf, key)

    def sni(sock: ssl.SSLObject, name: str | None, ctx: ssl.SSLContext) -> None:
        names.append(name)

    server_ctx.sni_callback = sni
    client_ctx = ssl.create_default_context(cafile=str(ca))
    for server in _serving(server_ctx):
        yield server, client_ctx, names


def test_tls_checks_the_certificate_against_the_name_not_the_address(
    tls_server: tuple[Server, ssl.SSLContext, list[str | None]],
) -> None:
    server, client_ctx, names = tls_server
    assert _call(LOOPBACK, server.url("/json", "localhost"), verify=client_ctx)["output"] == "ok"
    assert names == ["localhost"]  # SNI carries the name while the socket went to the vetted 127.0.0.1
    with pytest.raises(OutboundFailed, match="ConnectError"):
        _call(LOOPBACK, server.url("/json", "127.0.0.1"), verify=client_ctx)  # the cert names no IP
    with pytest.raises(OutboundRefused, match="loopback"):
        _call(OutboundPolicy(), server.url("/json", "localhost"), verify=client_ctx)
