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
from trustscore.services.ratings import RatedAgent, RatingView
from trustscore.store.ratings import Listener, RatingTable

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
    ) -> None:
        super().__init__(models, clock, medals)
        self.table = table
        self.poll = poll
        self.version = 0
        self._notified = asyncio.Event()
        self.listener = Listener(table.pool, self._notified.set)

    async def sync(self) -> int:
        """Apply every row written since the last sync; return how many (rows of unserved models are
        skipped: another process may serve more models)."""
        change = await self.table.changes(self.version)
        for row in change.rows:
            served = self._ratings.get(row.model)
            if served is None:
                continue
            if row.rating is None:  # the model no longer rates the agent
                served.pop(row.agent, None)
                continue
            medals = None if row.medals is None else msgspec.json.decode(row.medals, type=Medals)
            rating = msgspec.json.decode(row.rating, type=Rating)
            served[row.agent] = RatedAgent(rating, row.computed_at, row.log_size, medals)
        self.version = change.version
        self.size = change.log_size
        return len(change.rows)

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


__all__ = ["POLL", "RatingMirror"]
