"""Scope honesty read from the log: an agent's declarations, scope sittings and the scores
(docs/scope-honesty.md). The pure work is :func:`trustscore.scope.report.from_leaves`, which an auditor
runs on an export to get the same answer."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

from trustscore.errors import NotFound
from trustscore.scope.report import (
    CapabilityHistory,
    ScopeHonesty,
    ScopeSummary,
    capability_history,
    from_leaves,
    summary,
)
from trustscore.store.scope import ScopeStore


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class ScopeService:
    def __init__(self, store: ScopeStore, clock: Callable[[], dt.datetime] = _now) -> None:
        self.store = store
        self.clock = clock

    async def view(self, agent: str) -> ScopeHonesty:
        leaves = await self.store.agent_leaves(agent)
        if await self.store.newest_card(agent) is None:
            raise NotFound(f"there is no agent {agent}")
        return from_leaves(agent, leaves, self.clock())

    async def summary(self, agent: str) -> ScopeSummary | None:
        """The rating response's scope-honesty line (None for a key with no card: not an agent)."""
        if await self.store.newest_card(agent) is None:
            return None
        return summary(from_leaves(agent, await self.store.agent_leaves(agent), self.clock()))

    async def capability(self, agent: str, capability: str) -> CapabilityHistory:
        if await self.store.newest_card(agent) is None:
            raise NotFound(f"there is no agent {agent}")
        history = capability_history(agent, await self.store.agent_leaves(agent), capability)
        if history is None:
            raise NotFound(f"{agent} has never declared or been probed on capability {capability!r}")
        return history
