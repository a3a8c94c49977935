"""What the integrations add to the app: the agent search route's service, the MCP mount and the
bureau's A2A agent card and skills (one hook in trustscore.api.app). The services are read from the app's
state (trustscore.api.wiring) when a call arrives, so a call during start-up is "the service is starting"."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Sequence
from typing import Any

from litestar import Litestar
from litestar.di import Provide
from litestar.types import Guard

from trustscore.api.a2a_bureau import A2ABureau
from trustscore.api.mcp_mount import McpMount, ServicesBureau
from trustscore.api.search_routes import SearchController
from trustscore.api.wiring import STATE_KEY, Services
from trustscore.errors import StorageError
from trustscore.services.agent_search import AgentSearch
from trustscore.services.ladder import LadderService
from trustscore.services.public import PublicService


class Integrations:
    """Route handlers, dependencies and a lifespan for the app; services are read when first needed."""

    def __init__(self, mount_guards: Sequence[Guard] = (), max_body: int = 1 << 62) -> None:
        """``mount_guards`` run before the MCP and A2A mounts (the app's before-request hook does not);
        ``max_body``, the operator's body limit, lowers theirs when smaller."""
        self._app: Litestar | None = None
        bureau = ServicesBureau(self._public, self._ladder, self.search)
        self.mcp = McpMount(bureau, mount_guards, max_body)
        self.a2a = A2ABureau(self.mcp.server, mount_guards, max_body)

    def _services(self) -> Services | None:
        found = None if self._app is None else self._app.state.get(STATE_KEY)
        return found if isinstance(found, Services) else None

    def _public(self) -> PublicService | None:
        services = self._services()
        return None if services is None else services.public

    def _ladder(self) -> LadderService | None:
        services = self._services()
        return None if services is None else services.ladder

    def search(self) -> AgentSearch | None:
        """The public service's agent search, once the service is up."""
        public = self._public()
        return None if public is None else public.search

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
        self._app = app
        try:
            async with self.mcp.lifespan(app):
                yield
        finally:
            self._app = None
