"""A migrated database's connection pool for the store tests that need one."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from tests.integration.store.test_group_commit import card
from trustscore.ledger import keys
from trustscore.store import db
from trustscore.store.log import LogStore


class Queries:
    """The statements one pooled connection sends, in order."""

    def __init__(self) -> None:
        self.sent: list[str] = []

    def __call__(self, record: asyncpg.connection.LoggedQuery) -> None:
        self.sent.append(" ".join(record.query.split()))

    def take(self) -> list[str]:
        out, self.sent = self.sent, []
        return out


@pytest.fixture
async def pool(dsn: str) -> AsyncIterator[asyncpg.Pool]:
    await db.migrate(dsn)
    p = await db.create_pool(dsn, min_size=1, max_size=4)
    yield p
    p.terminate()  # a failed test may leave a connection taken


@pytest.fixture
async def store(dsn: str) -> AsyncIterator[LogStore]:
    await db.migrate(dsn)
    pool = await db.create_pool(dsn, min_size=1, max_size=2)
    yield LogStore(pool)
    await pool.close()


@pytest.fixture
async def logged(dsn: str) -> AsyncIterator[tuple[LogStore, Queries]]:
    """A store on one connection whose statements are logged, having appended once (so it knows its
    partitions and the log's next index, as a running service does after its first append)."""
    await db.migrate(dsn)
    pool = await db.create_pool(dsn, min_size=1, max_size=1)
    queries = Queries()
    async with pool.acquire() as conn:
        conn.add_query_logger(queries)
    store = LogStore(pool)
    await store.append([card(keys.SigningKey.generate(), "first", "0" * 32)])
    queries.take()
    yield store, queries
    await pool.close()
