"""The projector refreshes ratings when a run finds nothing new and, while entries keep arriving, at most
every ``rating_lag`` seconds (issue #16: a refresh's ~15 ms was paid per 0.1 s step); the ratings always
name the log size they reflect, and once ingest pauses they reflect everything projected."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import msgspec
import pytest

from trustscore.cli.agent import card_envelope
from trustscore.ledger import keys
from trustscore.ledger.submission import check, prepare
from trustscore.services.metrics import Metrics
from trustscore.services.projector import Projector
from trustscore.services.ratings import RatingService, load_models
from trustscore.store import db
from trustscore.store.log import LogStore
from trustscore.store.projection_tables import ProjectionStore

LOG_KEY = keys.SigningKey.from_seed(b"\x17" * 32)


@pytest.fixture
async def pool(dsn: str) -> AsyncIterator[asyncpg.Pool]:
    await db.migrate(dsn)
    p = await db.create_pool(dsn, min_size=1, max_size=4)
    yield p
    p.terminate()


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
