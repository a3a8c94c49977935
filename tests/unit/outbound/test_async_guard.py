"""The async client the A2A SDK is given obeys the outbound policy: an A2A endpoint cannot make the server
reach its own loopback or private network, whether named directly or by the card it serves."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from trustscore.outbound.async_guard import guarded_async_client
from trustscore.outbound.guard import OutboundFailed, OutboundPolicy, OutboundRefused
from trustscore.sdk.a2a_agent import A2AAgent
from trustscore.sdk.adapters import AgentRequest, AgentUnreachable, Message


class _Card(BaseHTTPRequestHandler):
    """Serves a JSON body of 2 MiB at every path (over the 1 MiB default response limit)."""

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        body = b'{"x": "' + b"a" * (2 * 1024 * 1024) + b'"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def local_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Card)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _get(url: str, policy: OutboundPolicy) -> httpx.Response:
    async def go() -> httpx.Response:
        async with guarded_async_client(policy) as client:
            return await client.get(url)

    return asyncio.run(go())


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:9/", "http://10.0.0.1:80/", "http://[::1]:9/", "http://169.254.169.254/"]
)
def test_loopback_private_and_metadata_addresses_are_refused(url: str) -> None:
    with pytest.raises(OutboundRefused):
        _get(url, OutboundPolicy(connect_timeout=1, total_timeout=2))


def test_allowed_loopback_is_reached_and_the_size_limit_holds(local_url: str) -> None:
    with pytest.raises(OutboundFailed, match=r"2097161-byte response, over 1048576"):
        _get(local_url + "/.well-known/agent-card.json", OutboundPolicy(allow_loopback=True))
    small = OutboundPolicy(allow_loopback=True, max_response_bytes=4 * 1024 * 1024)
    assert _get(local_url + "/", small).status_code == 200


def test_a2a_agent_behind_the_guard_cannot_reach_loopback(local_url: str) -> None:
    agent = A2AAgent(local_url, client_factory=lambda: guarded_async_client(OutboundPolicy()))
    try:
        with pytest.raises(AgentUnreachable, match=r"loopback"):
            agent.ask(AgentRequest("e@1", "i", 0, [Message("user", "hi")]), 10)
    finally:
        agent.close()
