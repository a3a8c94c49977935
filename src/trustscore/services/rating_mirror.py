"""The ratings an API process serves: a copy of the materialised table (migration 0016), kept current
by LISTEN/NOTIFY, holding one rating per agent and model and no evidence at all.

The process holding the "ratings" lease computes ratings (:class:`RatingService`) and writes each change
with a NOTIFY in the same transaction (store/ratings.py). A mirror reads the rows newer than the version
it has whenever a NOTIFY arrives, and at least every ``poll`` seconds in case one was missed (a lost
listening connection is re-made and followed by a read). Reads are those of :class:`RatingView`, so
every consumer serves the same ratings in every role.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import Callable

import msgspec

from trustscore.scoring.medals import MedalRules, Medals
from trustscore.scoring.ratings import Rating
from trustscore.scoring.weights import Weights
from trustscore.services.periodic import Periodic
from trustscore.services.ratings import RatedAgent, RatingView, _release
from trustscore.store.ratings import PAGE_ROWS, Listener, RatingRow, RatingTable

#: Longest wait between two reads of the table when no NOTIFY arrives (seconds).
POLL = 1.0


class RatingMirror(RatingView):
    def __init__(
        self,
        table: RatingTable,
        models: dict[str, Weights],
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
        medals: dict[str, MedalRules] | None = None,
        poll: float = POLL,
        page: int = PAGE_ROWS,
    ) -> None:
        """``page``: rows read, decoded and put in place at a time (:meth:`sync`)."""
        super().__init__(models, clock, medals)
        if page < 1:
            raise ValueError(f"a page holds at least one row, not {page}")
        self.table = table
        self.poll = poll
        self.page = page
        self.version = 0
        self._notified = asyncio.Event()
        self._syncing = asyncio.Lock()
        self.listener = Listener(table.pool, self._notified.set)

    async def sync(self) -> int:
        """Apply every row written since the last sync; return how many were read (rows of unserved models
        are skipped: another process may serve more models).

        The rows are read a page at a time (:data:`~trustscore.store.ratings.PAGE_ROWS`), each page
        decoded in a worker thread and then put in place on the event loop (dict updates only), the
        ratings it replaced freed in a worker thread. Before, reading and decoding every row ran on the
        loop at once: a mirror taking in a time refresh of 60,000 rows held it for 0.36-0.39 s (0.46-1.1 s
        starting empty; bench/mirror_sync.py). While a sync runs, readers may see some agents' ratings
        of the new version beside others' of the one before: each names its own time and log size, and
        the log size every rating holds for (``size``, which an unrated agent is stamped with) moves only
        once every row is in. A sync that fails part-way leaves the pages it applied; the next reads them
        again. Syncs run one at a time: one that read an older version must not apply its rows after a
        newer one's."""
        async with self._syncing:
            read = 0

            async def take(rows: list[RatingRow]) -> None:
                nonlocal read
                read += len(rows)
                decoded = await asyncio.to_thread(_decoded, rows, self._ratings)
                replaced: list[object | None] = []
                for served, agent, rated in decoded:
                    replaced.append(served.pop(agent, None) if rated is None else served.get(agent))
                    if rated is not None:
                        served[agent] = rated
                del decoded
                await asyncio.to_thread(_release, replaced)

            state = await self.table.changes(self.version, take, self.page)
            self.version = state.version
            self.size = state.log_size
            return read

    async def follow(self, stop: asyncio.Event) -> int:
        """One periodic step: (re)listen, wait for a NOTIFY (at most ``poll`` seconds, or until
        ``stop``), then sync."""
        if not await self.listener.ensure():
            waiters = [asyncio.create_task(self._notified.wait()), asyncio.create_task(stop.wait())]
            with contextlib.suppress(TimeoutError):
                await asyncio.wait(waiters, timeout=self.poll, return_when=asyncio.FIRST_COMPLETED)
            for w in waiters:
                w.cancel()
        if stop.is_set():
            await self.close()  # before the pool closes: it waits for every connection taken from it
            return 0
        self._notified.clear()
        return await self.sync()

    def periodic(self, stop: asyncio.Event) -> Periodic:
        """The background task of every API process (no lease: each process keeps its own copy)."""
        return Periodic("ratings mirror", lambda: self.follow(stop), 0.0)

    async def close(self) -> None:
        await self.listener.close()


def _decoded(
    rows: list[RatingRow], ratings: dict[str, dict[str, RatedAgent]]
) -> list[tuple[dict[str, RatedAgent], str, RatedAgent | None]]:
    """Each row of a served model as (that model's served ratings, agent, its rating with its medals;
    None: the model no longer rates the agent). Reads ``ratings`` only to find each model's dict: safe in
    a worker thread."""
    out: list[tuple[dict[str, RatedAgent], str, RatedAgent | None]] = []
    for row in rows:
        served = ratings.get(row.model)
        if served is None:
            continue
        if row.rating is None:
            out.append((served, row.agent, None))
            continue
        medals = None if row.medals is None else msgspec.json.decode(row.medals, type=Medals)
        rating = msgspec.json.decode(row.rating, type=Rating)
        out.append((served, row.agent, RatedAgent(rating, row.computed_at, row.log_size, medals)))
    return out


__all__ = ["POLL", "RatingMirror"]
