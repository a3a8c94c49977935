"""``GET /v1/search/agents``: agents by display name (confusable-aware) or id prefix."""

from __future__ import annotations

from typing import Annotated

import msgspec
from litestar import Controller, get
from litestar.datastructures import CacheControlHeader
from litestar.di import NamedDependency
from litestar.params import QueryParameter

from trustscore.api.openapi import READ_PROBLEMS
from trustscore.services.agent_search import MAX_QUERY, MAX_RESULTS, AgentSearch


class FoundOut(msgspec.Struct):
    id: str
    name: str
    exact: bool  # the name looks exactly like the query (or the id is the query): check the id anyway


class SearchOut(msgspec.Struct):
    query: str
    agents: list[FoundOut]


class SearchController(Controller):
    path = "/v1"
    tags = ["public"]  # noqa: RUF012 - Litestar class attribute
    cache_control = CacheControlHeader(public=True, max_age=5)

    @get("/search/agents", operation_id="searchAgents", responses=READ_PROBLEMS)
    async def search(
        self,
        agent_search: NamedDependency[AgentSearch],
        q: Annotated[
            str, QueryParameter(min_length=1, max_length=MAX_QUERY, description="name or id prefix")
        ],
        limit: Annotated[int, QueryParameter(ge=1, le=MAX_RESULTS)] = 10,
    ) -> SearchOut:
        """Agents whose display name looks like it contains ``q`` (names compared as confusable
        skeletons, so look-alikes are found too) or whose id starts with ``q``; exact matches first."""
        found = await agent_search.search(q, limit)
        return SearchOut(q, [FoundOut(f.id, f.name, f.exact) for f in found])
