"""Materialised ratings (migration 0016): what a worker's RatingService computes, an API process's
RatingMirror serves identically, woken by NOTIFY; an older computation never replaces a newer one."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Sequence

import asyncpg
import msgspec
import pytest

from tests.unit.services.test_ratings_recompute import ALICE, AT, BOB, before_1970, service
from trustscore.services.rating_mirror import RatingMirror
from trustscore.settings import SERVABLE_MODELS
from trustscore.store.ratings import RatingRow, RatingTable


async def test_the_mirror_serves_what_the_service_computed_woken_by_notify(pool: asyncpg.Pool) -> None:
    computing = service()
    computing.table = RatingTable(pool)
    mirror = RatingMirror(RatingTable(pool), computing.models, clock=lambda: AT, poll=60.0)
    stop = asyncio.Event()
    assert await mirror.follow(stop) == 0  # listens (a new connection: reads at once, nothing yet)
    assert mirror.stored(ALICE) is None and mirror.size == 0
    follower = asyncio.create_task(mirror.follow(stop))  # waits for a NOTIFY (or a minute)
    await asyncio.sleep(0.2)
    await computing.recompute_all()
    assert await asyncio.wait_for(follower, 10) == 2 * len(computing.models)  # the NOTIFY woke it
    for model in computing.models:
        for agent in (ALICE, BOB):
            assert mirror.stored(agent, model) == computing.stored(agent, model)
            assert mirror.rating(agent, model) == computing.rating(agent, model)
        assert mirror.all(model) == computing.all(model)
    stop.set()
    assert await mirror.follow(stop) == 0  # stopping closes the listening connection
    await mirror.close()


async def test_an_older_computation_never_replaces_a_newer_one(pool: asyncpg.Pool) -> None:
    computing = service()
    computing.table = RatingTable(pool)
    await computing.recompute_all()
    newer = computing.stored(ALICE)
    assert newer is not None
    older = computing.recompute([ALICE], at=AT - dt.timedelta(days=1))  # computed for an earlier time
    computing._ratings["trustscore-v2"][ALICE] = msgspec.structs.replace(newer, at=AT - dt.timedelta(days=1))
    await computing.publish({"trustscore-v2": older["trustscore-v2"]}, computing.size)
    mirror = RatingMirror(RatingTable(pool), computing.models)
    await mirror.sync()
    assert mirror.stored(ALICE) == newer
    await mirror.close()


class FailingOnce(RatingTable):
    """A table whose first write fails (the database went away for a moment)."""

    failed = False

    async def write(self, rows: Sequence[RatingRow], log_size: int) -> int:
        if not self.failed:
            self.failed = True
            raise OSError("connection lost")
        return await super().write(rows, log_size)


async def test_ratings_whose_write_failed_are_written_with_the_next(pool: asyncpg.Pool) -> None:
    computing = service()
    computing.table = FailingOnce(pool)
    with pytest.raises(OSError):
        await computing.recompute_all()
    await computing.publish({}, computing.size)  # nothing new: the failed rows alone
    mirror = RatingMirror(RatingTable(pool), computing.models)
    await mirror.sync()
    assert mirror.size == computing.size
    for model in computing.models:
        assert mirror.all(model) == computing.all(model) != []
    await mirror.close()


@pytest.mark.parametrize("path", ["refresh", "time refresh"])
async def test_a_rating_the_worker_drops_is_dropped_by_every_mirror(pool: asyncpg.Pool, path: str) -> None:
    """An agent a model comes to refuse (trustscore-v3: a pre-1970 row in a log written before intake
    refused them) loses its rating under that model in the worker; the table must say so too, or every
    API process keeps serving the old rating as current (review of 2026-12-04: only the unpublished row
    was dropped, the published one stayed)."""
    computing = service(models=SERVABLE_MODELS)
    computing.table = RatingTable(pool)
    await computing.recompute_all()
    mirror = RatingMirror(RatingTable(pool), computing.models)
    await mirror.sync()
    assert mirror.stored(BOB, "trustscore-v3") is not None
    computing._agents[BOB].evidence.append((computing.size, before_1970(BOB, 99)))
    computing.size += 1
    if path == "refresh":
        await computing.publish(computing.recompute([BOB]), computing.size)  # as refresh() does
    else:
        await computing.recompute_all()
    assert computing.stored(BOB, "trustscore-v3") is None
    await mirror.sync()
    assert mirror.stored(BOB, "trustscore-v3") is None
    assert mirror.rating(BOB, "trustscore-v3") is None
    for model in computing.models:
        assert mirror.all(model) == computing.all(model)
    fresh = RatingMirror(RatingTable(pool), computing.models)  # an API process starting now
    await fresh.sync()
    for model in computing.models:
        assert fresh.all(model) == computing.all(model)
    await mirror.close()
    await fresh.close()
