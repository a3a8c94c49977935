"""The evidence ladder's reads: outcome stats per group and a rating's per-dimension rung distribution.

Both are pure functions of the ladder rows (:mod:`trustscore.ladder.stats`) of the projected log prefix,
so ``trustscore stats`` over an export of the same prefix prints the same numbers.
"""

from __future__ import annotations

from trustscore.ladder.rows import LadderRow
from trustscore.ladder.stats import Distribution, OutcomeStats, by_dimension, check_floor, outcome_stats
from trustscore.store.ladder import LadderStore
from trustscore.store.projection_tables import ProjectionStore


class LadderService:
    def __init__(self, store: LadderStore, projections: ProjectionStore, floor: int) -> None:
        self.store = store
        self.projections = projections
        self.floor = check_floor(floor)
        self._cache: dict[tuple[str, int], OutcomeStats] = {}  # (group_by, floor) -> stats at a size

    async def outcomes(self, group_by: str, floor: int | None = None) -> OutcomeStats:
        """The verified share per group of the projected log, with n beside every row."""
        floor = check_floor(self.floor if floor is None else floor)
        size = await self.projections.projected_size()
        cached = self._cache.get((group_by, floor))
        if cached is not None and cached.log_size == size:
            return cached
        stats = outcome_stats(await self.store.rows(size), group_by, floor, size)
        if len(self._cache) > 64:
            self._cache.clear()
        self._cache[(group_by, floor)] = stats
        return stats

    async def rungs(self, agent: str, items: list[tuple[int, int]]) -> dict[tuple[int, int], LadderRow]:
        """The ladder row of each of ``agent``'s evidence items ``(index, seq)`` that has one."""
        if not items:
            return {}
        rows = await self.store.rows_between(agent, min(i for i, _ in items), max(i for i, _ in items))
        return {(r.index, r.seq): r for r in rows if r.seq is not None}

    async def dimensions(self, agent: str, log_size: int) -> dict[str, Distribution]:
        """Per dimension, the rung distribution of ``agent``'s evidence in ``[0, log_size)``, with n."""
        return by_dimension(await self.store.rows_of(agent, log_size))
