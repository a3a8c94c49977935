"""The MCP server mounted on the service at ``/mcp`` (streamable HTTP, stateless, JSON answers).

Its tools call the running service's own objects (no HTTP hop): the public read service, the ladder
service, the agent search and the log's verifier key, all taken from the app's runtime when a call
arrives, so a call during start-up is a tool error ("the service is starting"), not a crash. The SDK's
session manager runs inside the app's lifespan. DNS-rebinding protection is off: every tool is a public
read of data the REST API serves to anyone, and no credential is involved.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

import msgspec
from litestar import Litestar
from litestar.enums import ScopeType
from litestar.handlers import asgi
from litestar.types import Guard, Receive, Scope, Send
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings

from trustscore.api.mount_bodies import answered, bounded_body, gate, replayed
from trustscore.api.public_routes import agent_out, encode_rating, leaderboard_out
from trustscore.ladder.stats import MAX_GROUPS
from trustscore.services.agent_search import AgentSearch
from trustscore.services.ladder import LadderService
from trustscore.services.mcp_tools import build_server
from trustscore.services.public import PublicService

MOUNT_PATH = "/mcp"

#: The largest MCP request the bureau reads: the SDK's own default, kept. Every tool argument is a few
#: hundred bytes at most but ``verify_attestation``'s bundle (up to 8 MiB over stdio, services/mcp_tools.py),
#: which over HTTP is bounded here. The SDK answered its bound in plain text (api/mount_bodies.py).
MAX_MCP_BODY = 4 << 20


class ServicesBureau:
    """The bureau read in-process: the same services and encodings as the REST routes."""

    def __init__(
        self,
        public: Callable[[], PublicService | None],
        ladder: Callable[[], LadderService | None],
        search: Callable[[], AgentSearch | None],
    ) -> None:
        self._public, self._ladder, self._search = public, ladder, search

    @staticmethod
    def _ready(value: Any) -> Any:
        if value is None:
            raise ToolError("the service is starting; try again in a moment")
        return value

    async def agent(self, agent_id: str) -> dict[str, Any]:
        return _builtins(await agent_out(self._ready(self._public()), agent_id))

    async def search(self, query: str, limit: int) -> dict[str, Any]:
        search: AgentSearch = self._ready(self._search())
        found = await search.search(query, limit)
        return {"query": query, "agents": [{"id": f.id, "name": f.name, "exact": f.exact} for f in found]}

    async def rating(self, agent_id: str, model: str | None) -> dict[str, Any]:
        public: PublicService = self._ready(self._public())
        body: dict[str, Any] = msgspec.json.decode(await public.rating_body(agent_id, model, encode_rating))
        return body

    async def leaderboard(self, model: str | None, dimension: str | None, limit: int) -> dict[str, Any]:
        return _builtins(await leaderboard_out(self._ready(self._public()), model, dimension, limit))

    async def outcome_stats(
        self, group_by: str, floor: int | None, after: str | None, log_size: int | None
    ) -> dict[str, Any]:
        ladder: LadderService = self._ready(self._ladder())
        return _builtins(await ladder.outcomes(group_by, floor, MAX_GROUPS, after, log_size))

    async def log_key(self) -> str:
        public: PublicService = self._ready(self._public())
        return public.log.verifier_key


# Why a method other than POST is refused: the server is stateless (stateless_http=True).
_NOT_POST = {
    "GET": "this MCP server is stateless and offers no event stream: send requests by POST",
    "DELETE": "this MCP server is stateless and has no session to end: send requests by POST",
}


def _builtins(value: Any) -> dict[str, Any]:
    out: dict[str, Any] = msgspec.to_builtins(value)
    return out


class McpMount:
    """The MCP server, its ASGI handler for Litestar and the lifespan that runs its session manager."""

    def __init__(
        self, bureau: ServicesBureau, guards: Sequence[Guard] = (), max_body: int = MAX_MCP_BODY
    ) -> None:
        """``max_body``: the operator's body limit, when smaller than :data:`MAX_MCP_BODY`."""
        limit = min(max_body, MAX_MCP_BODY)
        self.server: MCPServer = build_server(bureau)
        self.app = self.server.streamable_http_app(
            streamable_http_path="/",
            stateless_http=True,
            json_response=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            max_request_body_size=limit,  # never reached: the body is read within it first
        )

        @asgi(MOUNT_PATH, is_mount=True, copy_scope=True, include_in_schema=False, guards=list(guards))
        async def mcp_endpoint(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] == ScopeType.HTTP:
                # The SDK held a GET's event stream open for good, though a stateless server never
                # sends a message of its own; the transport lets a server answer 405 instead.
                not_post = _NOT_POST.get(scope["method"], "the MCP endpoint takes requests by POST")
                if await gate(scope, send, not_post):
                    return
                body = await answered(scope, send, lambda: bounded_body(scope, receive, limit))
                if body is None:
                    return
                receive = replayed(body, receive)
            await self.app(scope, receive, send)  # type: ignore[arg-type]

        self.handler = mcp_endpoint

    @contextlib.asynccontextmanager
    async def lifespan(self, _app: Litestar) -> AsyncIterator[None]:
        async with self.server.session_manager.run():
            yield
