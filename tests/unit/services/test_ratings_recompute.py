"""The periodic full recompute runs in a worker thread; what it publishes must be what the event loop
would have computed, and it must never overwrite a newer rating made meanwhile from newer evidence."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
from typing import Any

import pytest

from trustscore.kinds.graded import DIMENSIONS
from trustscore.scoring.inputs import EvidenceItem
from trustscore.services.metrics import Metrics
from trustscore.services.ratings import RatingService, _AgentData, load_models
from trustscore.store.projection_tables import EvidenceRow

AT = dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC)
ALICE = "ts1_" + "a" * 40
BOB = "ts1_" + "b" * 40


def item(agent: str, value: float, n: int) -> EvidenceItem:
    dimension = DIMENSIONS[n % len(DIMENSIONS)]
    return EvidenceItem(
        agent=agent,
        dimension=dimension,
        source="real-benchmark",
        at=AT - dt.timedelta(days=n % 20),
        value=value,
        key=f"{dimension}@1/q{n}",
        issuer=f"ts1_{n:040x}",
    )


def service(clock: Any = lambda: AT) -> RatingService:
    ratings = RatingService(None, load_models(), Metrics(), clock=clock)  # type: ignore[arg-type]
    index = 0
    for agent, value in ((ALICE, 90.0), (BOB, 30.0)):
        data = ratings._agents[agent] = _AgentData()
        for n in range(40):
            data.evidence.append((index, item(agent, value, n)))
            index += 1
    ratings.size = index
    return ratings


def totals(ratings: RatingService, model: str) -> dict[str, Any]:
    return {a: ratings.stored(a, model).rating for a in (ALICE, BOB)}  # type: ignore[union-attr]


async def test_threaded_full_recompute_equals_the_one_on_the_loop() -> None:
    on_loop, threaded = service(), service()
    on_loop.recompute()
    await threaded.recompute_all()
    for model in on_loop.models:
        assert totals(threaded, model) == totals(on_loop, model)
        assert totals(threaded, model)[ALICE].total is not None


async def test_a_rating_refreshed_during_the_recompute_is_kept() -> None:
    ratings = service()
    ratings.recompute()
    entered, release = threading.Event(), threading.Event()
    score = ratings._score

    def slow_score(*args: Any) -> Any:
        if threading.current_thread() is not threading.main_thread():  # the worker, not the loop
            entered.set()
            assert release.wait(10)
        return score(*args)

    ratings._score = slow_score  # type: ignore[method-assign,assignment]
    task = asyncio.create_task(ratings.recompute_all())
    while not entered.is_set():  # the loop keeps running while the thread scores
        await asyncio.sleep(0.001)
    # Meanwhile new evidence about Bob arrives and is refreshed on the loop (as refresh() does).
    for n in range(40, 80):
        ratings._agents[BOB].evidence.append((ratings.size, item(BOB, 100.0, n)))
        ratings.size += 1
    ratings.recompute([BOB])
    bob_now = ratings.stored(BOB).rating  # type: ignore[union-attr]
    release.set()
    await task
    assert ratings.stored(BOB).rating == bob_now  # type: ignore[union-attr]  # not the stale one
    assert bob_now.total is not None and bob_now.total > 60  # 40 items at 30 then 40 at 100
    assert ratings.stored(ALICE) is not None


class GatedStore:
    """Projected rows behind a snapshot read that waits for a gate, or fails once."""

    def __init__(self, rows: list[EvidenceRow]) -> None:
        self.rows = rows
        self.gate = asyncio.Event()
        self.fail_once = False

    async def projected_size(self) -> int:
        return len(self.rows)

    async def evidence_since(self, start: int, end: int) -> list[EvidenceRow]:
        return self.rows[start:end]

    async def snapshots_since(self, start: int, end: int) -> list[Any]:
        if self.fail_once:
            self.fail_once = False
            raise ConnectionError("database went away")
        await self.gate.wait()
        return []


def gated() -> tuple[GatedStore, RatingService]:
    store = GatedStore([EvidenceRow(i, 0, item(ALICE, 80.0, i)) for i in range(40)])
    ratings = RatingService(store, load_models(), Metrics(), clock=lambda: AT)  # type: ignore[arg-type]
    return store, ratings


async def test_a_refresh_applies_nothing_until_it_has_read_everything() -> None:
    """A full recompute starting while a refresh waits on the database must not see evidence beyond
    the log size its ratings will name."""
    store, ratings = gated()
    refresh = asyncio.create_task(ratings.refresh())
    await asyncio.sleep(0.01)  # the refresh now waits on the snapshot read
    assert ratings._agents == {} and ratings.size == 0
    await ratings.recompute_all()  # sees nothing yet: publishes nothing
    assert ratings.stored(ALICE) is None
    store.gate.set()
    assert await refresh == {ALICE}
    assert ratings.size == 40 and len(ratings._agents[ALICE].evidence) == 40


async def test_a_failed_refresh_leaves_nothing_half_applied() -> None:
    store, ratings = gated()
    store.fail_once = True
    with pytest.raises(ConnectionError):
        await ratings.refresh()
    assert ratings._agents == {} and ratings.size == 0
    store.gate.set()
    await ratings.refresh()
    assert len(ratings._agents[ALICE].evidence) == 40  # once, not twice


class SlowStore:
    """Projected evidence of ALICE at [0, 10), read with a pause (so two refreshes overlap)."""

    async def projected_size(self) -> int:
        await asyncio.sleep(0.01)
        return 10

    async def evidence_since(self, start: int, end: int) -> list[EvidenceRow]:
        await asyncio.sleep(0.01)
        return [EvidenceRow(i, 0, item(ALICE, 80.0, i)) for i in range(start, end)]

    async def snapshots_since(self, start: int, end: int) -> list[Any]:
        return []


async def test_two_refreshes_at_once_add_each_projected_row_once() -> None:
    """The projector and the snapshot job both refresh; overlapping, they must not both add the rows
    (the snapshot job refreshes first so that a worker that just took the lease signs current ratings)."""
    ratings = RatingService(SlowStore(), load_models(), Metrics(), clock=lambda: AT)  # type: ignore[arg-type]
    await asyncio.gather(ratings.refresh(), ratings.refresh(), ratings.refresh())
    assert len(ratings._agents[ALICE].evidence) == 10 and ratings.size == 10
