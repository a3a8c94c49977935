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
import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import msgspec

from trustscore.scoring.medals import MedalRules, Medals
from trustscore.scoring.ratings import Rating
from trustscore.scoring.weights import Weights
from trustscore.services.periodic import Periodic
from trustscore.services.ratings import RatedAgent, RatingView, _release
from trustscore.store.ratings import PAGE_ROWS, Listener, RatingRow, RatingTable

T = TypeVar("T")

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
        self._executor: ThreadPoolExecutor | None = None
        self.listener = Listener(table.pool, self._notified.set)

    async def sync(self) -> int:
        """Apply every row written since the last sync; return how many were read (rows of unserved models
        are skipped: another process may serve more models).

        The rows are read a page at a time (:data:`~trustscore.store.ratings.PAGE_ROWS`) and decoded in
        the mirror's own worker thread; once the last page is read, that thread builds each changed
        model's new dict of ratings, and the event loop swaps them in with the new version and log size
        in one step, so readers see every rating of one version or every rating of the next, never a mix
        (a rating's log size is the view's: RatingView.rating), and a sync that fails part-way changes
        nothing. A change of at most one page (most syncs: a NOTIFY after new evidence) is put in place
        in the served dicts instead, in one step on the loop, without copying them. What a sync replaced,
        and what it decoded if it fails, are freed in the mirror's thread one object at a time.

        Before, reading and decoding every row ran on the loop: a mirror taking in a time refresh of
        60,000 rows held it for 0.31-0.44 s (0.38-1.05 s starting empty; bench/mirror_sync.py). The
        thread is the mirror's own, not the loop's default executor: pages must not wait behind grading
        while the read's transaction stays open. While a sync runs, the mirror holds about two pages of
        undecoded rows, and the new ratings beside the ones they replace until the swap. Syncs run one
        at a time."""
        async with self._syncing:
            decoded: list[Decoded] = []
            read = 0

            async def take(rows: list[RatingRow]) -> None:
                nonlocal read
                read += len(rows)
                decoded.extend(await self._in_thread(_decoded, rows, frozenset(self._ratings)))

            try:
                state = await self.table.changes(self.version, take, self.page)
                if len(decoded) <= self.page:  # a small change (most syncs): in place, in one step
                    _, retired = _merged(self._ratings, decoded, in_place=True)
                else:  # new dicts built off the loop (each a copy of a model's ratings), swapped in
                    fresh, retired = await self._in_thread(_merged, self._ratings, decoded)
                    retired += [self._ratings[model] for model in fresh]  # swapped out: freed first
                    self._ratings.update(fresh)
                    del fresh
                self.version = state.version
                self.size = state.log_size
                if decoded:
                    self.revision += 1
            except BaseException:
                # A failed or cancelled sync changes nothing; what it decoded is freed off the loop too.
                dropped, decoded = decoded, []
                await asyncio.shield(self._in_thread(_release, dropped))
                raise
            done, decoded = decoded, []
            await self._in_thread(_release_all, retired, done)
            return read

    async def _in_thread(self, run: Callable[..., T], *args: object) -> T:
        """``run(*args)`` in the mirror's own worker thread."""
        if self._executor is None:
            self._executor = ThreadPoolExecutor(1, thread_name_prefix="ratings-mirror")
        return await asyncio.get_running_loop().run_in_executor(self._executor, functools.partial(run, *args))

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
        executor, self._executor = self._executor, None
        if executor is not None:
            # Work already queued still runs. A sync still running when this is called (the service
            # never does: follow() closes in its own task, the app after awaiting its tasks) starts a
            # new thread for its next step, idle afterwards until the mirror is dropped or closed again.
            executor.shutdown(wait=False)


#: A decoded row: (model, agent, its rating with its medals; None: the model no longer rates the agent).
Decoded = tuple[str, str, RatedAgent | None]


def _decoded(rows: list[RatingRow], served: frozenset[str]) -> list[Decoded]:
    """The rows of ``served`` models, decoded (pure: in a worker thread)."""
    out: list[Decoded] = []
    for row in rows:
        if row.model not in served:
            continue
        if row.rating is None:
            out.append((row.model, row.agent, None))
            continue
        medals = None if row.medals is None else msgspec.json.decode(row.medals, type=Medals)
        rating = msgspec.json.decode(row.rating, type=Rating)
        out.append((row.model, row.agent, RatedAgent(rating, row.computed_at, row.log_size, medals)))
    return out


def _merged(
    ratings: dict[str, dict[str, RatedAgent]], decoded: list[Decoded], *, in_place: bool = False
) -> tuple[dict[str, dict[str, RatedAgent]], list[object | None]]:
    """``decoded`` put into the dicts of ``ratings`` (``in_place``), or into a copy of each dict it
    changes (``ratings`` only read: in a worker thread, while only a sync, one at a time, writes the
    mirror's ratings); returns the dicts changed by model and the ratings they replaced."""
    changed: dict[str, dict[str, RatedAgent]] = {}
    replaced: list[object | None] = []
    for model, agent, rated in decoded:
        kept = changed.get(model)
        if kept is None:
            kept = changed[model] = ratings[model] if in_place else dict(ratings[model])
        replaced.append(kept.pop(agent, None) if rated is None else kept.get(agent))
        if rated is not None:
            kept[agent] = rated
    return changed, replaced


def _release_all(*lists: list[Any]) -> None:
    """:func:`_release` each of ``lists`` in turn (one object at a time: between two the loop may run)."""
    for items in lists:
        _release(items)


__all__ = ["POLL", "RatingMirror"]
