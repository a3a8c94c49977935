"""A ratings mirror takes in a large change a page at a time, decoded off its event loop in a thread of
its own, and swaps it in at once: readers never see ratings of two versions beside each other or a rating
with a log size it does not hold for, a sync that fails part-way changes nothing, and one that read an
older version never applies after a newer one's (bench/mirror_sync.py: a time refresh rewrites every
row)."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import asyncpg
import msgspec
import pytest

from tests.unit.services.test_ratings_recompute import ALICE, AT, service
from trustscore.services import rating_mirror
from trustscore.services.rating_mirror import RatingMirror
from trustscore.services.ratings import _release
from trustscore.store.ratings import RatingRow, RatingsState, RatingTable

MODEL = "trustscore-v2"
BOTH = (MODEL, "baseline-v0.3")  # the models service() serves
AGENTS = [f"ts1_{i:040x}" for i in range(10)]


async def written(
    pool: asyncpg.Pool, total: int, at: dt.datetime, log_size: int, models: tuple[str, ...] = (MODEL,)
) -> None:
    """For each of ``models``, one rating per agent of :data:`AGENTS` (Alice's under that model, renamed,
    with ``total``) written to the table."""
    computing = service()
    await computing.recompute_all()
    rows = []
    for model in models:
        alice = computing.stored(ALICE, model)
        assert alice is not None
        for agent in AGENTS:
            rating = msgspec.structs.replace(alice.rating, agent=agent, total=total)
            rows.append(RatingRow(model, agent, msgspec.json.encode(rating), None, at, log_size))
    await RatingTable(pool).write(rows, log_size)


def served(mirror: RatingMirror, model: str = MODEL) -> dict[str, int | None]:
    return {r.rating.agent: r.rating.total for r in mirror.all(model)}


async def test_readers_never_see_two_versions_at_once(pool: asyncpg.Pool) -> None:
    """Review of bf9cf72: pages put in place one by one were served with the log size of the version
    before (RatingView.rating stamps the view's size): a rating of log size 9 served as holding for 7."""
    await written(pool, 500, AT, 7, BOTH)
    mirror = RatingMirror(RatingTable(pool), service().models, page=3)
    await mirror.sync()
    await written(pool, 600, AT + dt.timedelta(hours=1), 9, BOTH)
    seen: set[tuple[tuple[int | None, ...], int]] = set()
    done = False

    async def reader() -> None:  # every total served under both models, with the size
        while not done:
            totals = {t for model in BOTH for t in served(mirror, model).values()}
            seen.add((tuple(sorted(totals, key=str)), mirror.size))
            await asyncio.sleep(0)

    task = asyncio.create_task(reader())
    assert await mirror.sync() == len(AGENTS) * len(BOTH)
    done = True
    await task
    assert seen <= {((500,), 7), ((600,), 9)}, seen
    assert mirror.size == 9
    for model in BOTH:
        assert served(mirror, model) == dict.fromkeys(AGENTS, 600)
        for agent in AGENTS:
            rated = mirror.rating(agent, model)
            assert rated is not None and rated.log_size == 9 and rated.rating.total == 600
    await mirror.close()


async def test_pages_are_decoded_off_the_event_loop(
    pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    await written(pool, 500, AT, 7)
    threads: list[str] = []
    decode = rating_mirror._decoded

    def recorded(*args: Any) -> Any:
        threads.append(threading.current_thread().name)
        return decode(*args)

    monkeypatch.setattr(rating_mirror, "_decoded", recorded)
    mirror = RatingMirror(RatingTable(pool), service().models, page=3)
    assert await mirror.sync() == len(AGENTS)
    assert len(threads) == 4  # 10 rows in pages of 3
    assert all(name.startswith("ratings-mirror") for name in threads), threads
    await mirror.close()


async def test_a_busy_default_executor_does_not_hold_a_sync(pool: asyncpg.Pool) -> None:
    """Review of bf9cf72: pages decoded in the loop's default executor waited behind grading (which fills
    it) with the read's transaction open ("idle in transaction"), so an operator's
    idle_in_transaction_session_timeout failed every sync while grading lasted."""
    await written(pool, 500, AT, 7)
    mirror = RatingMirror(RatingTable(pool), service().models, page=3)
    release = threading.Event()
    loop = asyncio.get_running_loop()
    workers = min(32, (os.cpu_count() or 1) + 4)  # the default executor's size
    busy = [loop.run_in_executor(None, release.wait, 30) for _ in range(workers)]
    try:
        assert await asyncio.wait_for(mirror.sync(), 10) == len(AGENTS)
        assert served(mirror) == dict.fromkeys(AGENTS, 500)
    finally:
        release.set()
        await asyncio.gather(*busy)
    await mirror.close()


class Paused(RatingTable):
    """A table whose next read of changes waits after its first page until ``resume`` is set."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        super().__init__(pool)
        self.paused = asyncio.Event()
        self.resume = asyncio.Event()
        self.armed = True

    async def changes(
        self, since: int, take: Callable[[list[RatingRow]], Awaitable[None]], page: int = 2_000
    ) -> RatingsState:
        armed, self.armed = self.armed, False
        pages = 0

        async def taking(rows: list[RatingRow]) -> None:
            nonlocal pages
            await take(rows)
            pages += 1
            if armed and pages == 1:
                self.paused.set()
                await self.resume.wait()

        return await super().changes(since, taking, page)


async def test_a_sync_of_an_older_version_never_applies_after_a_newer_one(pool: asyncpg.Pool) -> None:
    """Sync A reads version 1 page by page; meanwhile newer ratings are written and sync B starts. B must
    not run between A's pages: A's later pages (older ratings) would replace B's newer ones."""
    await written(pool, 500, AT, 7)
    table = Paused(pool)
    mirror = RatingMirror(table, service().models, page=3)
    first = asyncio.create_task(mirror.sync())
    await asyncio.wait_for(table.paused.wait(), 10)
    await written(pool, 600, AT + dt.timedelta(hours=1), 9)
    second = asyncio.create_task(mirror.sync())
    await asyncio.sleep(0.2)  # without one sync at a time, the second reads and applies version 2 now
    table.resume.set()
    await asyncio.wait_for(asyncio.gather(first, second), 10)
    assert served(mirror) == dict.fromkeys(AGENTS, 600)
    assert mirror.size == 9 and mirror.version == 2
    await mirror.close()


async def test_a_sync_that_fails_part_way_is_taken_up_by_the_next(
    pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    await written(pool, 500, AT, 7)

    class Failing(RatingTable):
        async def changes(
            self, since: int, take: Callable[[list[RatingRow]], Awaitable[None]], page: int = 2_000
        ) -> RatingsState:
            async def taking(rows: list[RatingRow]) -> None:
                await take(rows)
                raise OSError("connection lost")

            return await super().changes(since, taking, page)

    freed: list[tuple[str, int]] = []  # (thread, objects) of each list freed

    def recorded(items: list[Any]) -> None:
        freed.append((threading.current_thread().name, len(items)))
        _release(items)

    monkeypatch.setattr(rating_mirror, "_release", recorded)
    mirror = RatingMirror(Failing(pool), service().models, page=4)
    with pytest.raises(OSError):
        await mirror.sync()
    assert served(mirror) == {} and mirror.size == 0 and mirror.version == 0  # nothing changed
    # What it decoded (the first page) is freed in the mirror's thread, not with the sync's frame.
    assert [n for thread, n in freed if thread.startswith("ratings-mirror")] == [4], freed
    mirror.table = RatingTable(pool)
    assert await mirror.sync() == len(AGENTS)
    assert served(mirror) == dict.fromkeys(AGENTS, 500) and mirror.size == 7
    await mirror.close()


@pytest.mark.parametrize("page", [0, -1])
def test_a_page_holds_at_least_one_row(page: int) -> None:
    with pytest.raises(ValueError, match="at least one row"):
        RatingMirror(RatingTable(None), service().models, page=page)  # type: ignore[arg-type]


@pytest.mark.parametrize("page", [3, 2_000])  # a change swapped in whole, and one put in place
async def test_revision_moves_with_every_change_and_only_then(pool: asyncpg.Pool, page: int) -> None:
    """Readers keep what they derive from the ratings (the leaderboards) by the view's revision: a time
    refresh changes ratings without moving the log size, and must move it; a sync without rows must not."""
    await written(pool, 500, AT, 7)
    mirror = RatingMirror(RatingTable(pool), service().models, page=page)
    await mirror.sync()
    first = mirror.revision
    assert await mirror.sync() == 0 and mirror.revision == first
    await written(pool, 600, AT + dt.timedelta(hours=1), 7)  # the same log size, new ratings
    await mirror.sync()
    assert mirror.revision > first and served(mirror) == dict.fromkeys(AGENTS, 600)
    await mirror.close()
