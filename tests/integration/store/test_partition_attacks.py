"""Attacks on the partitioned log (migration 0017), each written before its fix (issue #16 review)."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from tests.integration.store.test_partitions import (
    SPAN,
    Signed,
    append_as_0016,
    fresh_cards,
    migrate_with_span,
    owner,
    partitions,
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
        assert (await migrating)[:2] == ["0017_partitions.sql", "0018_hash_tiles.sql"]
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


# Objects the app role could create where it may create in the schema (PostgreSQL 14 and older let every
# role create in ``public``): each matches a call in the partition function better than the built-in it
# meant, and records whom it ran as.
_HIJACKS = [
    "CREATE TABLE loot (who text)",
    "GRANT INSERT ON loot TO PUBLIC",
    "CREATE FUNCTION steal_cat(a text, b integer) RETURNS text LANGUAGE sql "
    "AS $$ INSERT INTO loot VALUES (current_user); SELECT a || b::text $$",
    "CREATE OPERATOR || (LEFTARG = text, RIGHTARG = integer, FUNCTION = steal_cat)",
    "CREATE FUNCTION steal_eq(a oid, b regclass) RETURNS boolean LANGUAGE sql "
    "AS $$ INSERT INTO loot VALUES (current_user); SELECT a = b::oid $$",
    "CREATE OPERATOR = (LEFTARG = oid, RIGHTARG = regclass, FUNCTION = steal_eq)",
    "CREATE FUNCTION pg_advisory_xact_lock(k integer) RETURNS void LANGUAGE sql "
    "AS $$ INSERT INTO loot VALUES (current_user) $$",
    "CREATE FUNCTION format(f text, a text, b text) RETURNS text LANGUAGE sql "
    "AS $$ INSERT INTO loot VALUES (current_user); SELECT pg_catalog.format(f, a, b) $$",
]


async def test_regression_the_app_role_cannot_run_code_as_the_partition_functions_owner(dsn: str) -> None:
    """``trustscore_extend_partitions`` runs as the tables' owner with the app's schema on its
    ``search_path``. Its calls that only matched a built-in through an implicit conversion or a
    polymorphic or variadic signature (``text || integer``, ``oid = regclass``,
    ``pg_advisory_xact_lock(integer)``, ``format``) were taken by any better match the app role put in
    that schema, which then ran with the owner's rights (who may drop the log)."""
    await migrate_with_span(dsn)
    conn = await owner(dsn)
    try:
        await conn.execute(f"GRANT CREATE ON SCHEMA public TO {db.APP_ROLE}")
    finally:
        await conn.close()
    pool = await db.create_pool(dsn, min_size=1, max_size=1)
    try:
        async with pool.acquire() as app:
            assert await app.fetchval("SELECT current_user") == db.APP_ROLE
            for sql in _HIJACKS:
                await app.execute(sql)
            async with app.transaction():
                await app.execute("SELECT 1 FROM log_sequence FOR UPDATE")
                await app.fetchrow("SELECT * FROM trustscore_extend_partitions($1)", 3 * SPAN)
            assert await app.fetch("SELECT who FROM loot") == []
    finally:
        await pool.close()
    conn = await owner(dsn)
    try:
        assert await partitions(conn, "entries") == [(k * SPAN, (k + 1) * SPAN) for k in range(5)]
    finally:
        await conn.close()


# The tables a projector step writes that reference entries, in the order it writes them.
_STEP = ["evidence", "ladder", "snapshots", "webhook_subscriptions", "webhook_events"]


@pytest.mark.parametrize("first", range(len(_STEP) - 1))
async def test_a_needed_partition_and_a_projector_step_do_not_deadlock_the_append(
    dsn: str, first: int
) -> None:
    """A projector step writes evidence, then ladder, snapshots and webhook rows (tables that reference
    entries), in one transaction. An append that needs a partition meanwhile locks every table that
    references entries against writes, one after another; holding some while it waits for the step's,
    it must not also hold one the step asks for next: that cycle is a deadlock PostgreSQL breaks by
    failing the append, which waited first."""
    await migrate_with_span(dsn)
    pool = await db.create_pool(dsn, min_size=1, max_size=3)
    step = await owner(dsn)
    try:
        store = LogStore(pool)
        await store.append(fresh_cards("a", 1))
        tx = step.transaction()
        await tx.start()
        await step.execute(f"LOCK TABLE {_STEP[first]} IN ROW EXCLUSIVE MODE")  # the step's first write
        await store.append(fresh_cards("b", SPAN))  # the partition made ahead gives up
        appending = asyncio.create_task(store.append(fresh_cards("c", SPAN)))  # 16 needs one: waits
        await _waiting_on_a_lock(step)
        await step.execute("SET lock_timeout = '5s'")
        for table in _STEP[first + 1 :]:
            await step.execute(f"LOCK TABLE {table} IN ROW EXCLUSIVE MODE")  # the rest of the step
        await tx.commit()
        got = await appending
        assert [a.index for a in got] == list(range(1 + SPAN, 1 + 2 * SPAN))
    finally:
        await step.close()
        await pool.close()
