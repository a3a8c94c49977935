"""Attacks on the partitioned log (migration 0017), each written before its fix (issue #16 review)."""

from __future__ import annotations

import asyncio

import asyncpg

from tests.integration.store.test_partitions import (
    SPAN,
    Signed,
    append_as_0016,
    migrate_with_span,
    owner,
)
from trustscore.store import db
from trustscore.store.log import ENTRY_COLUMNS, LogStore, entry_records, side_table_problems


async def _waiting_on_a_lock(conn: asyncpg.Connection, at_least: int = 1) -> None:
    for _ in range(200):
        n = await conn.fetchval(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        )
        if n >= at_least:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("nothing came to wait on a lock")


async def test_regression_an_append_committed_while_the_migration_starts_keeps_its_side_rows(
    dsn: str,
) -> None:
    """The migration copied statement hashes and nonces into the side tables before it locked
    ``entries``: an append still in flight (ingest waits on the migration's lock, it is not stopped)
    committed in between and its entry had no side rows, so the same statement was logged again and its
    nonce could be replayed. The log here also ends exactly at a partition boundary."""
    await migrate_with_span(dsn, until=16)
    pool = await db.create_pool(dsn, min_size=1, max_size=2)
    watcher = await owner(dsn)
    try:
        signed = Signed.make(agents=2, events=SPAN)
        head, late = signed.entries[: SPAN - 1], signed.entries[SPAN - 1]
        await append_as_0016(pool, head)
        # An appender of the old release, in flight: its entry written, not yet committed.
        async with pool.acquire() as conn:
            tx = conn.transaction()
            await tx.start()
            start = await conn.fetchval("SELECT next_index FROM log_sequence FOR UPDATE")
            await conn.copy_records_to_table(
                "entries", columns=ENTRY_COLUMNS, records=entry_records([(start, late)])
            )
            await conn.execute("UPDATE log_sequence SET next_index = $1", start + 1)
            migrating = asyncio.create_task(db.migrate(dsn))
            await _waiting_on_a_lock(watcher)  # the migration waits for this transaction
            await tx.commit()
        assert await migrating == ["0017_partitions.sql"]
        assert await watcher.fetchval("SELECT next_index FROM log_sequence") == SPAN  # at a boundary
        assert await side_table_problems(watcher) == []
    finally:
        await watcher.close()
        await pool.close()
    pool = await db.create_pool(dsn, min_size=1, max_size=2)
    try:
        store = LogStore(pool)
        assert await store.statement_index(late.statement_hash) == start
        again = await store.append([late])  # a resubmission gets its first index back
        assert [(a.index, a.duplicate) for a in again] == [(start, True)]
        assert await store.sequenced_size() == start + 1
    finally:
        await pool.close()
