"""Scope honesty read from the log: an agent's declarations, scope sittings and the scores
(docs/scope-honesty.md). The pure work is :func:`trustscore.scope.report.from_leaves`, which an auditor
runs on an export to get the same answer."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass

from trustscore.errors import NotFound
from trustscore.scope.report import (
    CapabilityHistory,
    Prepared,
    ScopeHonesty,
    ScopeSummary,
    capability_history_of,
    prepare,
    statements_of,
    summary,
)
from trustscore.scope.runs import Collector
from trustscore.services.kept import Budgeted
from trustscore.store.scope import ScopeStore


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


#: Agents whose collected scope history a service keeps, and the card versions and runs they may hold
#: together (the least recently read agent is dropped first when either is exceeded).
KEPT_AGENTS = 4096
KEPT_ITEMS = 100_000  # ~1-2.3 KB each (a run with 8 declarations the most): ~100-230 MB


@dataclass
class _Kept:
    collector: Collector
    next_index: int = 0  # the log index after the last leaf fed
    broken: bool = False  # a feed failed part-way: the fold is no longer a fold of a prefix of the log
    prepared: Prepared | None = None  # the view of the fold, but for the time (made at first read)

    @property
    def items(self) -> int:
        return len(self.collector.cards) + len(self.collector.runs)


class ScopeService:
    def __init__(self, store: ScopeStore, clock: Callable[[], dt.datetime] = _now) -> None:
        self.store = store
        self.clock = clock
        # The folds of the agents read most recently, within a budget of the card versions and runs they hold.
        self._kept = Budgeted[str, _Kept](KEPT_AGENTS, KEPT_ITEMS, lambda kept: kept.items)

    async def view(self, agent: str) -> ScopeHonesty:
        prepared = await self._prepared(agent)
        if prepared is None:
            raise NotFound(f"there is no agent {agent}")
        return prepared.at(self.clock())

    async def summary(self, agent: str) -> ScopeSummary | None:
        """The rating response's scope-honesty line (None for a key with no card: not an agent)."""
        prepared = await self._prepared(agent)
        return None if prepared is None else summary(prepared.at(self.clock()))

    async def _prepared(self, agent: str) -> Prepared | None:
        """The agent's view but for the time (None without an agent card), kept with its fold until the
        fold moves: before 2026-12-07 each read built it whole (~64 µs a run: 0.64 s for an agent with
        10^4 runs, at every read of its scope-honesty view by anyone)."""
        kept = await self._collected(agent)
        collected = kept.collector
        if collected.card is None:
            return None
        prepared = kept.prepared
        if prepared is None:  # nothing awaited since the fold was read: it is the fold's
            prepared = prepare(agent, collected.cards, collected.runs, collected.card)
            if not kept.broken:
                kept.prepared = prepared
        return prepared

    async def capability(self, agent: str, capability: str) -> CapabilityHistory:
        collected = (await self._collected(agent)).collector
        if collected.card is None:
            raise NotFound(f"there is no agent {agent}")
        history = capability_history_of(agent, collected.runs, collected.card, capability)
        if history is None:
            raise NotFound(f"{agent} has never declared or been probed on capability {capability!r}")
        return history

    async def _collected(self, agent: str) -> _Kept:
        """The agent's card versions, runs and newest card, collected from its leaves and kept: a read
        parses only the leaves logged since the last read of that agent. Each read parsed every card
        and sitting of the agent before (2026-12-06): one that logged 3,000 versions of its card made
        every rating read of it cost 68-118 ms (tests/integration/api/test_scope_honesty_cost.py).
        The views are :func:`~trustscore.scope.report.from_leaves`' (what an auditor computes from an
        export), built from the same fold. A key without an agent card is not kept (a read of any
        string must not push real agents out), and a fold whose feed failed part-way is dropped."""
        for attempt in range(2):
            found = self._kept.get(agent)  # now the most recently read
            kept = _Kept(Collector(agent)) if found is None else found  # kept once it has an agent card
            leaves = await self.store.agent_leaves(agent, start=kept.next_index)
            if kept.broken:  # another read's feed failed part-way on this fold while this one waited
                if attempt == 0:
                    continue
                raise RuntimeError(f"the scope history of {agent} could not be read twice in a row")
            # Reads of one agent share its fold: another may have fed some of these while this one waited.
            new = [(index, leaf) for index, leaf in leaves if index >= kept.next_index]
            if new:
                try:
                    kept.collector.feed(statements_of(new))
                except BaseException:
                    kept.broken = True  # fed part-way: never served or fed again
                    if self._kept.peek(agent) is kept:
                        self._kept.pop(agent)
                    raise
                kept.next_index = new[-1][0] + 1
                kept.prepared = None  # a view of the fold before these
                if self._kept.peek(agent) is kept:
                    self._kept.touched(agent)
            break
        if kept.collector.card is not None and self._kept.peek(agent) is not kept:
            self._kept.put(agent, kept)  # (in place of a concurrent first read's fold)
        return kept
