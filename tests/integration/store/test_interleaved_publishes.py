"""Published rows encoded into one reused buffer stay each row's own bytes when two publishes interleave
(the time refresh and a refresh from new evidence), on the real table."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import asyncpg
import msgspec

from tests.unit.services.test_ratings_recompute import ALICE, BOB, item, service
from trustscore.scoring.medals import Medals
from trustscore.scoring.ratings import Rating
from trustscore.services.rating_mirror import RatingMirror
from trustscore.store.ratings import RatingRow, RatingTable


class Gated(RatingTable):
    """A table whose first write waits for a gate (the database is slow), recording every row."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        super().__init__(pool)
        self.entered, self.gate = asyncio.Event(), asyncio.Event()
        self.rows: list[RatingRow] = []

    async def write(self, rows: Sequence[RatingRow], log_size: int) -> int:
        self.rows += rows
        if not self.entered.is_set():
            self.entered.set()
            await self.gate.wait()
        return await super().write(rows, log_size)


async def test_interleaved_publishes_write_each_rows_own_bytes(pool: asyncpg.Pool) -> None:
    computing = service()
    table = computing.table = Gated(pool)
    first = asyncio.create_task(computing.recompute_all())
    await asyncio.wait_for(table.entered.wait(), 10)  # the time refresh's write waits
    for n in range(40, 80):  # new evidence about Bob, refreshed and published meanwhile
        computing._agents[BOB].evidence.append((computing.size, item(BOB, 100.0, n)))
        computing.size += 1
    second = asyncio.create_task(computing.publish(computing.recompute([BOB]), computing.size))
    await asyncio.sleep(0.05)
    table.gate.set()
    await asyncio.wait_for(asyncio.gather(first, second), 10)
    assert len({row.rating for row in table.rows}) > 2 * len(computing.models)  # Bob's two ratings
    for row in table.rows:  # every row's bytes are one whole encoding of its own rating and medals
        assert row.rating is not None  # no model refuses an agent here
        rating = msgspec.json.decode(row.rating, type=Rating)
        assert rating.agent == row.agent and rating.model_version == row.model
        assert msgspec.json.encode(rating) == row.rating
        if row.medals is not None:
            assert msgspec.json.encode(msgspec.json.decode(row.medals, type=Medals)) == row.medals
    mirror = RatingMirror(RatingTable(pool), computing.models)
    await mirror.sync()
    for model in computing.models:
        for agent in (ALICE, BOB):
            kept = computing.stored(agent, model)
            assert kept is not None and mirror.stored(agent, model) == kept
            assert msgspec.json.encode(mirror.stored(agent, model)) == msgspec.json.encode(kept)
    await mirror.close()
