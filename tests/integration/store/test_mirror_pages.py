"""A ratings mirror takes in a large change a page at a time: its event loop runs between pages, the log
size every rating holds for moves only once every row is in, and a sync that read an older version never
applies its rows after a newer one's (bench/mirror_sync.py: a time refresh rewrites every row)."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable, Callable

import asyncpg
import msgspec
import pytest

from tests.unit.services.test_ratings_recompute import ALICE, AT, service
from trustscore.scoring.ratings import Rating
from trustscore.services.rating_mirror import RatingMirror
from trustscore.store.ratings import RatingRow, RatingsState, RatingTable

MODEL = "trustscore-v2"
AGENTS = [f"ts1_{i:040x}" for i in range(10)]


async def written(pool: asyncpg.Pool, total: int, at: dt.datetime, log_size: int) -> dict[str, Rating]:
    """One rating per agent of :data:`AGENTS` (Alice's, renamed, with ``total``) written to the table."""
    computing = service()
    await computing.recompute_all()
    alice = computing.stored(ALICE, MODEL)
    assert alice is not None
    ratings = {a: msgspec.structs.replace(alice.rating, agent=a, total=total) for a in AGENTS}
    rows = [RatingRow(MODEL, a, msgspec.json.encode(r), None, at, log_size) for a, r in ratings.items()]
    await RatingTable(pool).write(rows, log_size)
    return ratings


def served(mirror: RatingMirror) -> dict[str, int | None]:
    return {r.rating.agent: r.rating.total for r in mirror.all(MODEL)}


async def test_the_loop_runs_between_pages_and_the_size_moves_last(pool: asyncpg.Pool) -> None:
    await written(pool, 500, AT, 7)
    mirror = RatingMirror(RatingTable(pool), service().models, page=3)
    seen: list[tuple[int, int]] = []  # (agents served, mirror.size) each time the loop ran a tick
    done = False

    async def ticker() -> None:
        while not done:
            seen.append((len(served(mirror)), mirror.size))
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    assert await mirror.sync() == len(AGENTS)
    done = True
    await task
    partial = {n for n, _ in seen if 0 < n < len(AGENTS)}
    assert partial, seen  # the loop ran while some pages were in and others not
    assert all(size == 0 for n, size in seen if n < len(AGENTS))  # the size moved only with the last page
    assert mirror.size == 7 and served(mirror) == dict.fromkeys(AGENTS, 500)
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


async def test_a_sync_that_fails_part_way_is_taken_up_by_the_next(pool: asyncpg.Pool) -> None:
    await written(pool, 500, AT, 7)

    class Failing(RatingTable):
        async def changes(
            self, since: int, take: Callable[[list[RatingRow]], Awaitable[None]], page: int = 2_000
        ) -> RatingsState:
            async def taking(rows: list[RatingRow]) -> None:
                await take(rows)
                raise OSError("connection lost")

            return await super().changes(since, taking, page)

    mirror = RatingMirror(Failing(pool), service().models, page=4)
    with pytest.raises(OSError):
        await mirror.sync()
    assert len(served(mirror)) == 4 and mirror.size == 0 and mirror.version == 0  # one page in
    mirror.table = RatingTable(pool)
    assert await mirror.sync() == len(AGENTS)
    assert served(mirror) == dict.fromkeys(AGENTS, 500) and mirror.size == 7
    await mirror.close()


@pytest.mark.parametrize("page", [0, -1])
def test_a_page_holds_at_least_one_row(page: int) -> None:
    with pytest.raises(ValueError, match="at least one row"):
        RatingMirror(RatingTable(None), service().models, page=page)  # type: ignore[arg-type]
