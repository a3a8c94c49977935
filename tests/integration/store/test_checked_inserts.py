"""Bulk inserts into tables with a foreign key into ``entries`` reuse one plan for the per-row checks
(``db.checked_inserts``), and nothing else changes: the keys are still checked, and the session is
back to planning every statement for its parameters afterwards, also when the block fails."""

from __future__ import annotations

import datetime as dt

import asyncpg
import pytest

from trustscore.store.db import checked_inserts
from trustscore.store.projection_tables import EVIDENCE_COLUMNS as EVIDENCE

MODE = "SHOW plan_cache_mode"


def _evidence_row(idx: int) -> tuple[object, ...]:
    at = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    return (idx, 0, "agent", "capability", "exam", 0.5, None, None, at, None, 1.0)


async def test_the_block_plans_once_and_gives_the_session_its_mode_back(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn, conn.transaction():
        assert await conn.fetchval(MODE) == "force_custom_plan"
        async with checked_inserts(conn):
            assert await conn.fetchval(MODE) == "auto"
        assert await conn.fetchval(MODE) == "force_custom_plan"
    async with pool.acquire() as conn:
        assert await conn.fetchval(MODE) == "force_custom_plan"


async def test_a_row_without_its_entry_is_still_refused(pool: asyncpg.Pool) -> None:
    """The foreign key is checked with the kept plan as with a fresh one: past the five executions
    after which PostgreSQL may switch to a generic plan, and for the row that has no entry."""
    async with pool.acquire() as conn:
        for attempt in range(8):
            with pytest.raises(asyncpg.ForeignKeyViolationError):
                async with conn.transaction(), checked_inserts(conn):
                    await conn.copy_records_to_table(
                        "evidence", columns=EVIDENCE, records=[_evidence_row(attempt)]
                    )
        assert await conn.fetchval("SELECT count(*) FROM evidence") == 0
        assert await conn.fetchval(MODE) == "force_custom_plan"


async def test_a_failed_block_in_a_savepoint_leaves_the_rest_of_the_transaction_as_it_was(
    pool: asyncpg.Pool,
) -> None:
    """``_register_keys`` catches a failed COPY in a savepoint and goes on in the same transaction: the
    setting made in the savepoint goes with it."""
    async with pool.acquire() as conn, conn.transaction():
        with pytest.raises(asyncpg.ForeignKeyViolationError):
            async with conn.transaction(), checked_inserts(conn):
                await conn.copy_records_to_table("evidence", columns=EVIDENCE, records=[_evidence_row(3)])
        assert await conn.fetchval(MODE) == "force_custom_plan"
