"""The pool's sessions keep what ``create_pool`` set on them, however often they are taken and given back."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from trustscore.store import db
from trustscore.store.webhooks import WebhookStore


async def test_regression_a_read_pool_stays_read_only_after_a_release(dsn: str) -> None:
    """asyncpg's default release ran RESET ALL, which undid ``default_transaction_read_only`` (and the
    planner setting) after a connection's first use: the read pool then accepted writes."""
    await db.migrate(dsn)
    reads = await db.create_pool(dsn, min_size=1, max_size=1, read_only=True)
    try:
        for _ in range(3):  # one connection, taken and given back again and again
            assert await reads.fetchval("SHOW default_transaction_read_only") == "on"
            assert await reads.fetchval("SHOW plan_cache_mode") == "force_custom_plan"
        with pytest.raises(asyncpg.ReadOnlySQLTransactionError):
            await reads.execute("CREATE TABLE read_pool_wrote (x int)")
    finally:
        await reads.close()


async def test_a_released_connection_holds_no_transaction(pool: asyncpg.Pool) -> None:
    """What a release must still undo: a transaction left open (asyncpg rolls it back)."""
    async with pool.acquire() as conn:
        await conn.transaction().start()
        await conn.execute("SELECT set_config('trustscore.left_open', 'yes', true)")  # transaction-local
    async with pool.acquire() as conn:
        assert not conn.is_in_transaction()
        assert await conn.fetchval("SELECT current_setting('trustscore.left_open', true)") in (None, "")


async def test_the_webhook_dispatch_lock_is_given_back_or_its_session_ended(pool: asyncpg.Pool) -> None:
    """Sessions are not reset on release, so the one session-level lock taken on a pooled connection
    must never go back to the pool held."""
    store = WebhookStore(pool)
    held = "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND granted"
    async with pool.acquire() as conn, store.dispatch_lock(conn) as locked:
        assert locked
        assert await conn.fetchval(held) == 1
    assert await pool.fetchval(held) == 0
    store.unlock = _fails  # type: ignore[method-assign]  # the unlock is lost (a broken connection)
    with pytest.raises(ConnectionResetError):
        await _dispatch_failing(pool, store)
    for _ in range(100):  # the ended session's backend exits, and PostgreSQL releases its lock
        if await pool.fetchval(held) == 0:
            break
        await asyncio.sleep(0.05)
    assert await pool.fetchval(held) == 0


async def _dispatch_failing(pool: asyncpg.Pool, store: WebhookStore) -> None:
    async with pool.acquire() as conn, store.dispatch_lock(conn):
        raise RuntimeError("dispatch failed")


async def _fails(conn: object) -> None:
    raise ConnectionResetError("lost")
