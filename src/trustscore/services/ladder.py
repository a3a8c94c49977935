"""The evidence ladder's reads: outcome stats per group and a rating's per-dimension rung distribution.

Both are pure functions of the ladder rows (:mod:`trustscore.ladder.stats`) of the projected log prefix,
so ``trustscore stats`` over an export of the same prefix prints the same numbers.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from trustscore.errors import Conflict, InvalidInput
from trustscore.ladder.rows import LadderRow
from trustscore.ladder.stats import (
    MAX_GROUPS,
    Distribution,
    OutcomeStats,
    Tally,
    by_dimension,
    check_floor,
    check_group_by,
)
from trustscore.services.kept import Budgeted
from trustscore.services.single_flight import SingleFlight
from trustscore.store.ladder import LadderStore, rows_of
from trustscore.store.projection_tables import ProjectionStore

#: A new tally of the log's ladder rows is made at the earliest this many times the making of the last one
#: after it: the outcome stats cost at most about 1/(1 + TALLY_SPACING) of the time, whatever the rate of
#: requests and appends (each tally reads every ladder row of the log).
TALLY_SPACING = 4.0
#: Tallies kept, the newest and the one before it, so that a caller paging through the groups of one
#: (naming its log size) is not cut off by the next making (each may hold every group: not more).
KEPT_TALLIES = 2
#: Agents whose scoring ladder rows a service keeps, and the rows they may hold together (~0.8 KB each as
#: asyncpg reads them: ~160 MB; one agent with more is kept whole).
KEPT_LADDERS = 4096
KEPT_LADDER_ROWS = 200_000


@dataclass
class _KeptLadder:
    end: int  # the rows of the entries [0, end) are these
    rows: list[LadderRow]  # those carrying scoring evidence, in log order
    dims: dict[str, Distribution]  # by_dimension(rows)


class LadderService:
    def __init__(self, store: LadderStore, projections: ProjectionStore, floor: int) -> None:
        self.store = store
        self.projections = projections
        self.floor = check_floor(floor)
        self._recent: dict[int, Tally] = {}  # the last KEPT_TALLIES made, by log size, oldest first
        self._next_tally = 0.0  # time.monotonic() before which the kept tally is served as it is
        self._making = SingleFlight[None, Tally]()
        # Per agent, its scoring rows and their distributions (dimensions()), within a budget of rows.
        self._ladders = Budgeted[str, _KeptLadder](
            KEPT_LADDERS, KEPT_LADDER_ROWS, lambda kept: len(kept.rows)
        )
        self._settled = False  # the one-time backfill of old entries' ladder rows is done

    async def outcomes(
        self,
        group_by: str,
        floor: int | None = None,
        limit: int = MAX_GROUPS,
        after: str | None = None,
        log_size: int | None = None,
    ) -> OutcomeStats:
        """The verified share per group of the projected log, with n beside every row and the log size
        it holds for: at most ``limit`` groups after the name ``after`` (``next`` names the last one when
        more follow). A caller paging through the groups passes the first page's ``log_size``: the later
        pages come from that same tally while it is one of the last :data:`KEPT_TALLIES` made, else
        :class:`~trustscore.errors.Conflict` (start again).

        Every grouping and floor is answered from one :class:`~trustscore.ladder.stats.Tally` of the log
        (before, each (grouping, floor) read every ladder row of the log again, so a floor that changed
        at each request read the whole log each time). A new tally is made when the projected log has
        moved on and :data:`TALLY_SPACING` times the last making has passed; callers meanwhile share it
        and are answered for the size it holds for (stale by the spacing, never wrong)."""
        check_group_by(group_by)
        floor = check_floor(self.floor if floor is None else floor)
        if not 1 <= limit <= MAX_GROUPS:
            raise InvalidInput(f"limit must be 1..{MAX_GROUPS}")
        tally = await self._current() if log_size is None else self._recent.get(log_size)
        if tally is None and log_size is not None:
            # A size the projected log never had is the caller's mistake; one it had, a tally no longer
            # kept here (or kept by another API process: paging starts again).
            projected = await self.projections.projected_size()
            if log_size > projected:
                raise InvalidInput(
                    f"log_size {log_size} is past the projected log ({projected}): give the log_size of "
                    "the first page's answer, or none"
                )
        if tally is None:
            raise Conflict(
                f"the outcome stats of log size {log_size} are no longer kept (the log moved on): "
                "ask for the first page again"
            )
        return tally.stats(group_by, floor, limit, after)

    @property
    def _tally(self) -> Tally | None:
        """The newest tally made: of the projected log as it was at the last making."""
        return next(reversed(self._recent.values()), None)

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
        # One making for the callers arriving while it runs (shielded: a caller that goes away does not
        # cancel it for the others; its error is read even when every caller went away).
        return await self._making.get(None, self._make)

    async def _make(self) -> Tally:
        size = await self.projections.projected_size()
        # Read inside the making, so callers arriving during the size read share it. The log has not
        # moved since the kept tally: it is served as it is.
        kept = self._kept(size)
        if kept is not None:
            return kept
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
        self._recent.pop(tally.log_size, None)  # a size made again (the log never shrinks) is the newest
        self._recent[tally.log_size] = tally
        while len(self._recent) > KEPT_TALLIES:
            del self._recent[next(iter(self._recent))]
        self._next_tally = time.monotonic() + TALLY_SPACING * (time.monotonic() - start)
        return tally

    async def rungs(self, agent: str, items: list[tuple[int, int]]) -> dict[tuple[int, int], LadderRow]:
        """The ladder row of each of ``agent``'s evidence items ``(index, seq)`` that has one."""
        if not items:
            return {}
        rows = await self.store.scoring_rows(agent, min(i for i, _ in items), max(i for i, _ in items) + 1)
        return {(r.index, r.seq): r for r in rows if r.seq is not None}

    async def dimensions(self, agent: str, log_size: int) -> dict[str, Distribution]:
        """Per dimension, the rung distribution of ``agent``'s evidence in ``[0, log_size)``, with n.

        Every rating body made (at the first read after any log movement) asked for it, and it read all
        the agent's ladder rows again: ~34 ms at 10^4 items (20 ms of reading, 13 of counting). The rows
        of each agent read most recently are kept with the log size they were read to (the rows of the
        entries below it never change once projected), so a read asks only for the rows since, and counts
        again only when there are any. Not while the one-time backfill of old entries' rows is under way
        (rows below the log size may still come then)."""
        if not self._settled:
            self._settled = await self.store.backfill_below() == 0
            if not self._settled:
                return by_dimension(await self.store.scoring_rows(agent, 0, log_size))
        kept = self._ladders.peek(agent)
        if kept is None or log_size < kept.end:  # none kept, or a rating of an older prefix
            rows = await self.store.scoring_rows(agent, 0, log_size)
            dims = by_dimension(rows)
            if kept is None and agent not in self._ladders:  # none kept by another read meanwhile
                self._ladders.put(agent, _KeptLadder(log_size, rows, dims))
            return dims
        self._ladders.get(agent)  # now the most recently read
        # Read before the await: another read may move the kept rows on meanwhile (their list is never
        # changed in place, a new one is kept).
        end, held, dims = kept.end, kept.rows, kept.dims
        if log_size == end:
            return dims
        new = await self.store.scoring_rows(agent, end, log_size)
        if new:
            dims = by_dimension(held + new)
        if self._ladders.peek(agent) is kept and kept.end == end:  # not moved by another read meanwhile
            kept.end, kept.rows, kept.dims = log_size, held + new, dims
            self._ladders.touched(agent)
        return dims
