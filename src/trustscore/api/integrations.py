"""What the integrations add to the app: the agent search route's service, the MCP mount and the
bureau's A2A agent card, built from the app's runtime (one hook in trustscore.api.app)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from typing import Any

from litestar import Litestar
from litestar.di import Provide

from trustscore.api.a2a_bureau import A2ABureau
from trustscore.api.mcp_mount import McpMount, ServicesBureau
from trustscore.api.search_routes import SearchController
from trustscore.errors import StorageError
from trustscore.services.agent_search import AgentSearch
from trustscore.services.ladder import LadderService
from trustscore.services.public import PublicService


class Integrations:
    """Route handlers, dependencies and a lifespan for the app; services are read when first needed."""

    def __init__(
        self, public: Callable[[], PublicService | None], ladder: Callable[[], LadderService | None]
    ) -> None:
        self._public = public
        self._search: AgentSearch | None = None
        self.mcp = McpMount(ServicesBureau(public, ladder, self.search))
        self.a2a = A2ABureau(self.mcp.server)

    def search(self) -> AgentSearch | None:
        """The agent search over the public service's projections, made once the service is up."""
        if self._search is None:
            public = self._public()
            if public is not None:
                self._search = AgentSearch(public.store)
        return self._search

    def _search_dependency(self) -> AgentSearch:
        found = self.search()
        if found is None:
            raise StorageError("the service is starting")
        return found

    @property
    def handlers(self) -> list[Any]:
        return [SearchController, self.mcp.handler, *self.a2a.handlers]

    @property
    def dependencies(self) -> dict[str, Provide]:
        return {"agent_search": Provide(self._search_dependency, sync_to_thread=False)}

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Litestar) -> AsyncIterator[None]:
        async with self.mcp.lifespan(app):
            yield
