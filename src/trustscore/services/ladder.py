"""The evidence ladder's reads: outcome stats per group and a rating's per-dimension rung distribution.

Both are pure functions of the ladder rows (:mod:`trustscore.ladder.stats`) of the projected log prefix,
so ``trustscore stats`` over an export of the same prefix prints the same numbers.
"""

from __future__ import annotations

import asyncio
import time

from trustscore.ladder.rows import LadderRow
from trustscore.ladder.stats import (
    Distribution,
    OutcomeStats,
    Tally,
    by_dimension,
    check_floor,
    check_group_by,
)
from trustscore.store.ladder import LadderStore, rows_of
from trustscore.store.projection_tables import ProjectionStore

#: A new tally of the log's ladder rows is made at the earliest this many times the making of the last one
#: after it: the outcome stats cost at most about 1/(1 + TALLY_SPACING) of the time, whatever the rate of
#: requests and appends (each tally reads every ladder row of the log).
TALLY_SPACING = 4.0


class LadderService:
    def __init__(self, store: LadderStore, projections: ProjectionStore, floor: int) -> None:
        self.store = store
        self.projections = projections
        self.floor = check_floor(floor)
        self._tally: Tally | None = None  # of the projected log as it was at the last making
        self._next_tally = 0.0  # time.monotonic() before which the kept tally is served as it is
        self._making: asyncio.Task[Tally] | None = None

    async def outcomes(self, group_by: str, floor: int | None = None) -> OutcomeStats:
        """The verified share per group of the projected log, with n beside every row and the log size
        it holds for.

        Every grouping and floor is answered from one :class:`~trustscore.ladder.stats.Tally` of the log
        (before, each (grouping, floor) read every ladder row of the log again, so a floor that changed
        at each request read the whole log each time). A new tally is made when the projected log has
        moved on and :data:`TALLY_SPACING` times the last making has passed; callers meanwhile share it
        and are answered for the size it holds for (stale by the spacing, never wrong)."""
        check_group_by(group_by)
        floor = check_floor(self.floor if floor is None else floor)
        return (await self._current()).stats(group_by, floor)

    def _kept(self, size: int | None = None) -> Tally | None:
        """The kept tally if it may be served: within the spacing, or of ``size`` (the projected size)."""
        kept = self._tally
        if kept is not None and (time.monotonic() < self._next_tally or kept.log_size == size):
            return kept
        return None

    async def _current(self) -> Tally:
        kept = self._kept()
        if kept is not None:
            return kept
        if self._making is None or self._making.done():
            size = await self.projections.projected_size()
            # Asked again: a making may have ended (and set the spacing) while the size was read.
            kept = self._kept(size)
            if kept is not None:
                return kept
            if self._making is None or self._making.done():  # none started while the size was read
                self._making = asyncio.ensure_future(self._make(size))
                # Its error is read even when every caller went away (no "never retrieved" warning).
                self._making.add_done_callback(lambda t: t.cancelled() or t.exception())
        # Shielded: a caller that goes away does not cancel the making the others wait for.
        return await asyncio.shield(self._making)

    async def _make(self, size: int) -> Tally:
        start = time.monotonic()
        try:
            records = await self.store.records(size)
            # Rows made and passed over in a thread: the event loop serves others meanwhile.
            tally = await asyncio.to_thread(lambda: Tally.of(rows_of(records), size))
        except BaseException:
            # A failed making is spaced too (callers meanwhile get the kept tally, if any), so a failing
            # database is not asked for the whole log at every request.
            self._next_tally = time.monotonic() + TALLY_SPACING * (time.monotonic() - start)
            raise
        self._tally = tally
        self._next_tally = time.monotonic() + TALLY_SPACING * (time.monotonic() - start)
        return tally

    async def rungs(self, agent: str, items: list[tuple[int, int]]) -> dict[tuple[int, int], LadderRow]:
        """The ladder row of each of ``agent``'s evidence items ``(index, seq)`` that has one."""
        if not items:
            return {}
        rows = await self.store.rows_between(agent, min(i for i, _ in items), max(i for i, _ in items))
        return {(r.index, r.seq): r for r in rows if r.seq is not None}

    async def dimensions(self, agent: str, log_size: int) -> dict[str, Distribution]:
        """Per dimension, the rung distribution of ``agent``'s evidence in ``[0, log_size)``, with n."""
        return by_dimension(await self.store.rows_of(agent, log_size))
