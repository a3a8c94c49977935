"""The SSRF guard behind an ``httpx.AsyncClient``, for the libraries that only speak async (the A2A SDK).

Each request is handed to the guarded synchronous transport (trustscore.outbound.guard) in a worker
thread, so every check applies unchanged: addresses vetted at connect time, redirects, the size limit
and the policy's total time limit (which also bounds the thread: a cancelled caller does not leave it
running longer than that). The client takes no settings from the environment and keeps no cookies.
"""

from __future__ import annotations

import asyncio

import httpx

from trustscore.outbound.guard import GuardedTransport, OutboundPolicy, _client_options


class ThreadedGuardedTransport(httpx.AsyncBaseTransport):
    """An async transport that runs each request through a :class:`GuardedTransport` in a thread."""

    def __init__(self, policy: OutboundPolicy) -> None:
        self.policy = policy
        self._sync = GuardedTransport(policy)

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        body = await request.aread()
        sync_request = httpx.Request(
            request.method, request.url, headers=request.headers, content=body, extensions=request.extensions
        )
        response = await asyncio.to_thread(self._sync.handle_request, sync_request)
        return httpx.Response(
            response.status_code,
            headers=response.headers,
            content=response.read(),  # already read (and bounded) inside the guarded transport
            extensions={k: v for k, v in response.extensions.items() if k == "http_version"},
        )

    async def aclose(self) -> None:
        await asyncio.to_thread(self._sync.close)


def guarded_async_client(policy: OutboundPolicy) -> httpx.AsyncClient:
    """An async client enforcing ``policy`` with the guard's own client options."""
    return httpx.AsyncClient(transport=ThreadedGuardedTransport(policy), **_client_options(policy))
