"""A migrated database's connection pool for the store tests that need one."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import pytest

from trustscore.store import db
from trustscore.store.log import LogStore


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
