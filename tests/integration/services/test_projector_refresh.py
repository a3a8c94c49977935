"""The projector refreshes ratings when a run finds nothing new and, while entries keep arriving, at most
every ``rating_lag`` seconds (issue #16: a refresh's ~15 ms was paid per 0.1 s step); the ratings always
name the log size they reflect, and once ingest pauses they reflect everything projected."""

from __future__ import annotations

import threading
from typing import Any

import asyncpg
import msgspec
import pytest

from trustscore.cli.agent import card_envelope
from trustscore.evidence.project_log import ProjectionState
from trustscore.ledger import keys
from trustscore.ledger.submission import check, prepare
from trustscore.services.metrics import Metrics
from trustscore.services.projector import Projector
from trustscore.services.ratings import RatingService, load_models
from trustscore.store.log import LogStore
from trustscore.store.projection_tables import ProjectionStore

LOG_KEY = keys.SigningKey.from_seed(b"\x17" * 32)


class Clock:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def append_cards(store: LogStore, n: int) -> None:
    cards = [card_envelope(keys.SigningKey.generate(), f"agent {i}") for i in range(n)]
    known: dict[str, bytes] = {}  # a card introduces its own key
    await store.append([check(prepare(msgspec.to_builtins(c)), known.get) for c in cards])


async def test_ratings_lag_at_most_rating_lag_while_entries_arrive_and_catch_up_when_they_stop(
    pool: asyncpg.Pool,
) -> None:
    store, projections, clock = LogStore(pool), ProjectionStore(pool), Clock()
    ratings = RatingService(projections, load_models(), Metrics())
    projector = Projector(
        store, projections, LOG_KEY.public_key, ratings, batch=2, rating_lag=1.0, clock=clock
    )
    await projector.load()

    await append_cards(store, 3)
    await projector.catch_up()  # two steps: the first refreshes (never refreshed yet), the second waits
    assert (await projections.projected_size(), ratings.size) == (3, 2)

    await append_cards(store, 2)
    clock.now += 0.9
    await projector.catch_up()  # entries keep arriving, the last refresh was 0.9 s ago: no refresh
    assert (await projections.projected_size(), ratings.size) == (5, 2)

    await append_cards(store, 1)
    clock.now += 0.1
    await projector.catch_up()  # 1 s since the last refresh: this step's refresh covers everything
    assert (await projections.projected_size(), ratings.size) == (6, 6)

    await append_cards(store, 1)
    await projector.catch_up()
    assert ratings.size == 6
    await projector.catch_up()  # nothing new: ingest paused, the ratings catch up at once
    assert (await projections.projected_size(), ratings.size) == (7, 7)


async def test_a_zero_rating_lag_refreshes_after_every_step(pool: asyncpg.Pool) -> None:
    store, projections = LogStore(pool), ProjectionStore(pool)
    ratings = RatingService(projections, load_models(), Metrics())
    projector = Projector(
        store, projections, LOG_KEY.public_key, ratings, batch=2, rating_lag=0.0, clock=Clock()
    )
    await projector.load()
    await append_cards(store, 3)
    await projector.catch_up()
    assert (await projections.projected_size(), ratings.size) == (3, 3)


class FailingFrom:
    """An after-step hook (the webhook events' slot) that fails every step starting at ``index`` or
    later: a projection stuck on one entry (a bug, a constraint, a statement timeout)."""

    def __init__(self) -> None:
        self.index: int | None = None

    async def __call__(self, conn: object, start: int, end: int) -> int:
        if self.index is not None and start >= self.index:
            raise RuntimeError(f"projection of entry {start} fails")
        return 0


async def test_a_failing_step_leaves_the_deferred_steps_out_of_the_ratings(pool: asyncpg.Pool) -> None:
    """Steps that committed before a failing step of the same run are projected but never refreshed:
    while the failure persists, catch_up never reaches "nothing new", and the ratings stay behind what is
    projected (before the merge, every committed step was refreshed at once)."""
    store, projections, clock, hook = LogStore(pool), ProjectionStore(pool), Clock(), FailingFrom()
    ratings = RatingService(projections, load_models(), Metrics())
    projector = Projector(
        store, projections, LOG_KEY.public_key, ratings, batch=2, rating_lag=1.0, clock=clock, after_step=hook
    )
    await projector.load()
    await append_cards(store, 2)
    await projector.catch_up()  # the first refresh
    assert ratings.size == 2
    await append_cards(store, 2)
    clock.now += 0.5
    await projector.catch_up()  # entries keep arriving: projected, the refresh deferred
    assert (await projections.projected_size(), ratings.size) == (4, 2)
    await append_cards(store, 2)  # the next step is stuck
    hook.index = 4
    for _ in range(5):  # the failure persists, runs go on (services/periodic.py backs off, retries)
        clock.now += 10.0  # far more than rating_lag
        with pytest.raises(RuntimeError):
            await projector.catch_up()
    assert await projections.projected_size() == 4
    assert ratings.size == 4, "ratings never reflect the step projected before the stuck one"


async def test_a_steady_trickle_refreshes_within_rating_lag_plus_one_run(pool: asyncpg.Pool) -> None:
    """Every run finds one new entry (never "nothing new"): the ratings still move at least every
    rating_lag, one run late at most."""
    store, projections, clock = LogStore(pool), ProjectionStore(pool), Clock()
    ratings = RatingService(projections, load_models(), Metrics())
    projector = Projector(store, projections, LOG_KEY.public_key, ratings, rating_lag=1.0, clock=clock)
    await projector.load()
    covered_at: dict[int, float] = {}
    worst = 0.0
    for _ in range(40):
        await append_cards(store, 1)
        covered_at[await projections.projected_size()] = clock.now
        await projector.catch_up()
        oldest_unrated = min((t for s, t in covered_at.items() if s > ratings.size), default=clock.now)
        worst = max(worst, clock.now - oldest_unrated)
        clock.now += 0.1  # project_interval
    assert worst <= 1.0 + 1e-9


async def test_resume_reloads_only_when_the_projection_moved_or_a_step_failed(pool: asyncpg.Pool) -> None:
    """On taking the lease a projector reloads every evidence item (at scale, the longest thing it does),
    unless its state is still what the database holds: right after a start-up load under the lease, the
    reload would be a second one for nothing. Another holder's steps, or a failed step of its own, make
    it reload."""
    store, projections, hook = LogStore(pool), ProjectionStore(pool), FailingFrom()
    mine = Projector(
        store, projections, LOG_KEY.public_key, RatingService(projections, load_models(), Metrics()),
        batch=2, rating_lag=0.0, clock=Clock(), after_step=hook,
    )  # fmt: skip
    other = Projector(
        store, projections, LOG_KEY.public_key, RatingService(projections, load_models(), Metrics()),
        rating_lag=0.0, clock=Clock(),
    )  # fmt: skip
    loads: list[int] = []
    load = mine.load

    async def counted() -> None:
        loads.append(mine.state.next_index)
        await load()

    mine.load = counted  # type: ignore[method-assign]
    await mine.resume()  # a fresh projector of an empty projection: nothing to load
    await append_cards(store, 3)
    await mine.catch_up()
    await mine.resume()
    assert loads == []
    await append_cards(store, 2)
    await other.load()
    await other.catch_up()  # another process held the lease meanwhile
    await mine.resume()
    assert loads == [3] and mine.state.next_index == 5
    hook.index = 5
    await append_cards(store, 1)
    with pytest.raises(RuntimeError):
        await mine.catch_up()
    assert loads == [3, 6]  # the failed step had moved the state past the rolled-back entry: reloaded
    assert mine.state.next_index == 5
    hook.index = None
    await mine.resume()
    assert loads == [3, 6]  # and that load left a state that needs none


async def test_a_load_rebuilds_its_state_off_the_event_loop(pool: asyncpg.Pool) -> None:
    """Taking the lease over reloads every snapshot, approval and evidence item: parsed and fed in a
    worker thread, on a state the projector takes only once it is whole."""
    store, projections = LogStore(pool), ProjectionStore(pool)
    projector = Projector(
        store, projections, LOG_KEY.public_key, RatingService(projections, load_models(), Metrics()),
        rating_lag=0.0, clock=Clock(),
    )  # fmt: skip
    await append_cards(store, 3)
    await projector.catch_up()
    threads: list[threading.Thread] = []
    rebuilt = projector._rebuilt

    def recording(*args: Any) -> ProjectionState:
        threads.append(threading.current_thread())
        assert projector.state is not None and not projector._current  # the old state, marked stale
        return rebuilt(*args)

    projector._rebuilt = recording  # type: ignore[method-assign,assignment]
    await projector.load()
    assert threads and threads[0] is not threading.main_thread()
    assert projector._current and projector.state.next_index == 3
