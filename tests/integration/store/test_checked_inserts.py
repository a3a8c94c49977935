"""Bulk inserts into tables with a foreign key into ``entries`` reuse one plan for the per-row checks
(``db.checked_inserts``), and nothing else changes: the keys are still checked, and the session is
back to planning every statement for its parameters afterwards, also when the block fails."""

from __future__ import annotations

import datetime as dt

import asyncpg
import pytest

from tests.integration.store.test_partitions import SPAN, migrate_with_span, owner
from trustscore.store import db
from trustscore.store.db import GENERIC_CHECKS_UP_TO, checked_inserts
from trustscore.store.projection_tables import EVIDENCE_COLUMNS as EVIDENCE

MODE = "SHOW plan_cache_mode"
AT = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _evidence_row(idx: int, seq: int = 0) -> tuple[object, ...]:
    return (idx, seq, "agent", "capability", "exam", 0.5, None, None, AT, None, 1.0)


async def test_the_block_plans_once_and_gives_the_session_its_settings_back(pool: asyncpg.Pool) -> None:
    async with pool.acquire() as conn:
        seqscan = await conn.fetchval("SHOW enable_seqscan")  # whatever the server's configuration says
        async with conn.transaction():
            assert await conn.fetchval(MODE) == "force_custom_plan"
            async with checked_inserts(conn):
                assert await conn.fetchval(MODE) == "force_generic_plan"  # a new log: two partitions
                assert await conn.fetchval("SHOW enable_seqscan") == "off"
            assert await conn.fetchval(MODE) == "force_custom_plan"
            assert await conn.fetchval("SHOW enable_seqscan") == seqscan
    async with pool.acquire() as conn:
        assert await conn.fetchval(MODE) == "force_custom_plan"
        assert await conn.fetchval("SHOW enable_seqscan") == seqscan


async def test_a_row_without_its_entry_is_still_refused(pool: asyncpg.Pool) -> None:
    """The foreign key is checked with the kept plan as with a fresh one, at every one of several
    blocks on one connection, for the row that has no entry."""
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


async def add_entries(
    conn: asyncpg.Connection | asyncpg.pool.PoolConnectionProxy, start: int, count: int, kind: str = "kind"
) -> None:
    """``count`` filler entries (leaves of 1,000 bytes) of ``kind`` from index ``start`` on, written as rows."""
    await conn.execute(
        "INSERT INTO entries (idx, leaf, leaf_hash, statement_hash, signer, nonce, kind, subject) "
        "SELECT i, convert_to(repeat('x', 1000), 'UTF8'), sha256(int8send(i)), sha256(int8send(-i - 1)), "
        "'signer', 'n' || i, $3, 'agent' FROM generate_series($1::bigint, $2::bigint) AS i",
        start,
        start + count - 1,
        kind,
    )


async def test_regression_a_plan_made_while_the_log_was_tiny_does_not_scan_it_once_it_has_grown(
    pool: asyncpg.Pool,
) -> None:
    """A generic plan is made once and kept until the table's statistics change. Made for a log of three
    entries it was a sequential scan of the partition (cheaper than its index then), and every later
    check on that connection read the whole partition, however large it had grown, until autovacuum
    analysed it. The checks in the block must look each entry up by its index, whenever the plan was made."""
    scans = "SELECT seq_scan, idx_scan FROM pg_stat_xact_user_tables WHERE relname = 'entries_p0'"
    async with pool.acquire() as conn:
        async with conn.transaction():
            await add_entries(conn, 0, 3)
        for seq in range(2):  # 16 checks: under ``auto`` a plan is kept after five
            rows = [_evidence_row(i % 3, 8 * seq + i) for i in range(8)]
            async with conn.transaction(), checked_inserts(conn):
                await conn.copy_records_to_table("evidence", columns=EVIDENCE, records=rows)
        async with conn.transaction():
            await add_entries(conn, 3, 2_000)
        async with conn.transaction(), checked_inserts(conn):
            before = await conn.fetchrow(scans)
            rows = [_evidence_row(3 + i) for i in range(8)]
            await conn.copy_records_to_table("evidence", columns=EVIDENCE, records=rows)
            after = await conn.fetchrow(scans)
        assert before is not None and after is not None
        assert after["seq_scan"] == before["seq_scan"], "a check read the whole partition"
        assert after["idx_scan"] - before["idx_scan"] == 8


#: The partitions of entries this backend holds a lock on (until its transaction ends).
ENTRY_PARTITION_LOCKS = (
    "SELECT count(DISTINCT l.relation) FROM pg_locks l JOIN pg_inherits i ON i.inhrelid = l.relation "
    "WHERE i.inhparent = 'entries'::regclass AND l.pid = pg_backend_pid()"
)


async def entries_with_partitions(dsn: str, partitions: int) -> None:
    """A log of 8 entries (one partition of SPAN) whose entries table has ``partitions`` partitions."""
    await migrate_with_span(dsn)
    conn = await owner(dsn)
    try:
        await add_entries(conn, 0, SPAN)
        await conn.execute("SELECT trustscore_extend_partitions($1::bigint)", (partitions - 2) * SPAN)
        assert (
            await conn.fetchval("SELECT count(*) FROM pg_inherits WHERE inhparent = 'entries'::regclass")
            == partitions
        )
    finally:
        await conn.close()


@pytest.mark.parametrize("partitions", [GENERIC_CHECKS_UP_TO, GENERIC_CHECKS_UP_TO + 1])
async def test_past_the_limit_each_check_is_planned_for_its_partition(dsn: str, partitions: int) -> None:
    """On PostgreSQL 15 a generic plan locks every partition of entries at each check, however few it
    reads: at 200 partitions a check cost 5x the plan made for its row. Up to the limit the checks share
    one plan (which locks them all); past it each check locks the one partition it reads."""
    await entries_with_partitions(dsn, partitions)
    pool = await db.create_pool(dsn, min_size=1, max_size=1)
    try:
        async with pool.acquire() as conn, conn.transaction():
            async with checked_inserts(conn):
                mode = await conn.fetchval(MODE)
                rows = [_evidence_row(i) for i in range(SPAN)]
                await conn.copy_records_to_table("evidence", columns=EVIDENCE, records=rows)
            locked = await conn.fetchval(ENTRY_PARTITION_LOCKS)
            assert await conn.fetchval(MODE) == "force_custom_plan"
    finally:
        await pool.close()
    if partitions <= GENERIC_CHECKS_UP_TO:
        assert (mode, locked) == ("force_generic_plan", partitions)
    else:
        assert (mode, locked) == ("force_custom_plan", 1)
