"""Every POST costs its client address one token of the per-address allowance, or, on the routes that
write entries, one per entry (docs/service.md, "Write limits"). The MCP server at ``/mcp`` and the A2A
endpoint at ``/a2a/`` are ASGI mounts, which the app's before-request hook never sees: their POSTs cost
nothing, so one address could call their tools (a bundle's verification is hundreds of milliseconds of
CPU) without bound. They are charged one token per POST now, like any other POST."""

from __future__ import annotations

from dataclasses import replace

import httpx
from litestar.testing import AsyncTestClient

from tests.integration.api.test_attestations import from_address, on_app
from trustscore.api.app import create_app
from trustscore.settings import Settings

MCP_HEADERS = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
LIST = b'{"jsonrpc":"2.0","id":1,"method":"tools/list"}'


async def test_posts_to_the_mounts_cost_their_address_a_token(settings: Settings, dsn: str) -> None:
    tight = replace(settings, address_rate_per_minute=3)  # a burst of 3
    async with AsyncTestClient(app=create_app(tight, dsn)) as client:

        async def call(host: str, method: str, path: str, body: bytes = b"") -> httpx.Response:
            async with from_address(client, host) as c:
                return await c.request(method, path, content=body, headers=MCP_HEADERS)

        async def run() -> list[httpx.Response]:
            return [
                await call("203.0.113.7", "POST", "/mcp/", LIST),
                await call("203.0.113.7", "GET", "/mcp/"),  # refused 405, costs nothing: not a POST
                await call("203.0.113.7", "POST", "/a2a/", b'{"jsonrpc":"2.0","id":1,"method":"x"}'),
                await call("203.0.113.7", "POST", "/mcp", LIST),
                await call("203.0.113.7", "POST", "/mcp/", LIST),  # a fourth POST: none left
                await call("203.0.113.7", "POST", "/a2a/", b"{}"),
                await call("198.51.100.1", "POST", "/mcp/", LIST),  # another address: its own
            ]

        answers = await on_app(client, run)
        assert [r.status_code for r in answers] == [200, 405, 200, 200, 429, 429, 200], [
            (r.status_code, r.text[:200]) for r in answers
        ]
        for refused in answers[4:6]:
            assert refused.headers["content-type"].startswith("application/problem+json")
            assert refused.json()["type"].endswith("/rate-limited") and "retry-after" in refused.headers
        assert "verify_attestation" in answers[0].text  # the tools are listed as before
