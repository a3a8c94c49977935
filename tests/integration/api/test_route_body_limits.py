"""Each route taking one signed statement reads at most what its largest legal statement needs.

Before 2026-12-07 a settlement, event, subscription or sitting request of up to 16 MiB (the app's limit)
was read and parsed on the event loop for one token of the client's rate limit: ~50 ms of the whole
process a request. A body past its route's limit (or the operator's TRUSTSCORE_MAX_BODY_BYTES, when that
is smaller: the report routes' own 4 MiB used to win over it) is now a 413 problem+json, never parsed.
The mounted JSON-RPC apps (MCP, A2A) are bounded the same way: the MCP SDK's own bound (4 MiB) answered
a plain-text 413 without a content type, and neither mount heeded the operator's smaller limit."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from tests.helpers import count_calls
from trustscore.api.a2a_bureau import MAX_A2A_BODY
from trustscore.api.app import create_app
from trustscore.api.mcp_mount import MAX_MCP_BODY
from trustscore.api.mount_bodies import bounded_body
from trustscore.errors import PayloadTooLarge
from trustscore.kinds.events import MAX_EVENT_BYTES
from trustscore.kinds.exam_report import MAX_REPORT_BYTES
from trustscore.kinds.settlements import MAX_SETTLEMENT_BYTES
from trustscore.kinds.sittings import MAX_REQUEST_BYTES
from trustscore.kinds.subscriptions import MAX_SUBSCRIPTION_BYTES
from trustscore.services.log import LogService
from trustscore.services.sittings import MAX_DIALOGUE_BYTES
from trustscore.settings import Settings

Client = AsyncTestClient[Litestar]
APP = 1 << 62  # the app's limit (TRUSTSCORE_MAX_BODY_BYTES)
LIMITS = {
    "/v1/settlements": MAX_SETTLEMENT_BYTES,
    "/v1/events": MAX_EVENT_BYTES,
    "/v1/subscriptions": MAX_SUBSCRIPTION_BYTES,
    "/v1/sittings": MAX_REQUEST_BYTES,
    "/v1/sittings/7/dialogue": MAX_DIALOGUE_BYTES,
    "/v1/sittings/7/report": APP,  # its answers are not capped like an exam report's
    "/v1/reports": MAX_REPORT_BYTES,
}

# The mounted JSON-RPC apps: a body is read within the bound before their SDK sees it.
MOUNTS = {"/mcp/": MAX_MCP_BODY, "/a2a/": MAX_A2A_BODY}
JSON_RPC = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def _refused(r: httpx.Response, limit: int) -> None:
    assert r.status_code == 413, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert f"({limit} bytes at most)" in r.json()["detail"], r.json()


async def _chunked(
    app: Any, path: str, host: str = "127.0.0.1", sizes: list[int] | None = None
) -> tuple[int, int]:
    """``path`` POSTed a body without a length (chunked) from ``host``, driven through the app's ASGI
    interface (the test client cannot stream one): chunks of ``sizes`` bytes (default 10,000 of 64 KiB),
    blanks. The status answered and the chunks read."""
    left = [65536] * 10_000 if sizes is None else list(sizes)
    read, status = 0, 0

    async def receive() -> dict[str, Any]:
        nonlocal read
        read += 1
        return {"type": "http.request", "body": b" " * left[read - 1], "more_body": read < len(left)}

    async def send(message: dict[str, Any]) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]

    scope = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": path, "raw_path": path.encode(), "root_path": "", "query_string": b"",
        "headers": [(b"host", b"testserver"), (b"content-type", b"application/json")],
        "client": (host, 5000), "server": ("testserver", 80),
    }  # fmt: skip
    await app(scope, receive, send)
    return status, read


async def test_a_body_past_its_route_limit_is_refused_unparsed(
    client: Client, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsed = count_calls(monkeypatch, LogService, "parse_body")
    for path, own in LIMITS.items():
        limit = min(own, settings.max_body_bytes)
        _refused(await client.post(path, content=b" " * (limit + 1)), limit)
        # Without a length: read until the limit is passed, no further.
        assert await _chunked(client.app, path) == (413, limit // 65536 + 1), path
        # At the limit the body is read and parsed (and refused for what it is: blanks).
        r = await client.post(path, content=b" " * limit)
        assert r.status_code in (400, 404), (path, r.text)
    assert parsed[0] == 6  # the six statement routes at their limits (the dialogue is no envelope)


async def test_the_operators_smaller_limit_governs_every_route(tmp_path: Path, dsn: str) -> None:
    small = 64 * 1024
    settings = Settings(data_dir=tmp_path / "data", integrate_interval=0.05, max_body_bytes=small)
    async with AsyncTestClient(app=create_app(settings, dsn)) as client:
        for path, own in {**LIMITS, **MOUNTS}.items():
            _refused(await client.post(path, content=b" " * (small + 1), headers=JSON_RPC), min(own, small))
            assert await _chunked(client.app, path) == (413, 2), path


async def test_a_mounted_json_rpc_body_past_its_bound_is_refused_unread(
    client: Client, settings: Settings
) -> None:
    """MCP and A2A: 413 problem+json past the bound, declared or chunked; at the bound the SDK answers."""
    for path, own in MOUNTS.items():
        limit = min(own, settings.max_body_bytes)
        _refused(await client.post(path, content=b" " * (limit + 1), headers=JSON_RPC), limit)
        assert await _chunked(client.app, path) == (413, limit // 65536 + 1), path
        call = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'
        r = await client.post(path, content=call + b" " * (limit - len(call)), headers=JSON_RPC)
        assert r.status_code == 200 and r.json()["id"] == 1, (path, r.text)


async def test_the_mcp_mount_reads_at_most_its_own_bound(tmp_path: Path, dsn: str) -> None:
    """Under an operator's limit larger than the mounts' own, their own bound holds (4 MiB, 1 MiB); a
    Content-Length of more digits than Python's int() reads is too large, not a 500."""
    settings = Settings(data_dir=tmp_path / "data", integrate_interval=0.05, max_body_bytes=8 << 20)
    async with AsyncTestClient(app=create_app(settings, dsn)) as client:
        for path, own in MOUNTS.items():
            _refused(await client.post(path, content=b" " * (own + 1), headers=JSON_RPC), own)
            assert await _chunked(client.app, path) == (413, own // 65536 + 1), path
        scope: Any = {"type": "http", "method": "POST", "headers": [(b"content-length", b"1" * 5000)]}
        with pytest.raises(PayloadTooLarge):
            await bounded_body(scope, _never_read, MAX_MCP_BODY)


async def _never_read() -> Any:
    raise AssertionError("the body was read")
