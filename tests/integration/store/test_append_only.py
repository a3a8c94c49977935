"""The database itself refuses to change or remove log rows: triggers, and privileges of the app role."""

from __future__ import annotations

from collections.abc import AsyncIterator

import asyncpg
import msgspec
import pytest

from tests.helpers import new_card
from trustscore.ledger.submission import check, prepare
from trustscore.store import db
from trustscore.store.log import LogStore

TABLES = ["entries", "keys", "tree_nodes", "checkpoints", "log_meta"]


@pytest.fixture
async def store(dsn: str) -> AsyncIterator[LogStore]:
    await db.migrate(dsn)
    pool = await db.create_pool(dsn, min_size=1, max_size=2)
    s = LogStore(pool)
    _, env = new_card("row")
    p = prepare(msgspec.to_builtins(env))
    await s.append([check(p, lambda _k: None)])
    await s.integrate(lambda size, root: f"note {size}", max_batch=100)
    await s.put_meta_once("probe", "x")
    yield s
    await pool.close()


@pytest.mark.parametrize("table", TABLES)
async def test_update_delete_truncate_refused_even_for_the_owner(
    dsn: str, store: LogStore, table: str
) -> None:
    conn = await asyncpg.connect(dsn)  # the migrating owner, not the app role
    try:
        before = await conn.fetchval(f"SELECT count(*) FROM {table}")
        assert before >= 1
        column = {
            "entries": "nonce",
            "keys": "id",
            "tree_nodes": "hash",
            "checkpoints": "signed_note",
            "log_meta": "value",
        }[table]
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
            await conn.execute(f"UPDATE {table} SET {column} = {column}")
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
            await conn.execute(f"DELETE FROM {table}")
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
            await conn.execute(f"TRUNCATE {table} CASCADE")
        assert await conn.fetchval(f"SELECT count(*) FROM {table}") == before
    finally:
        await conn.close()


async def test_sequence_only_moves_forward(dsn: str, store: LogStore) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="forward"):
            await conn.execute("UPDATE log_sequence SET next_index = 0")
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute("DELETE FROM log_sequence")
    finally:
        await conn.close()


async def test_app_role_cannot_even_disable_the_triggers(store: LogStore) -> None:
    async with store.pool.acquire() as conn:
        assert await conn.fetchval("SELECT current_user") == db.APP_ROLE
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await conn.execute("ALTER TABLE entries DISABLE TRIGGER entries_append_only")
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="permission denied"):
            await conn.execute("DELETE FROM entries")
        # It can still do its job: read and append.
        assert await conn.fetchval("SELECT count(*) FROM entries") == 1


async def test_migrations_are_idempotent(dsn: str, store: LogStore) -> None:
    assert await db.migrate(dsn) == []
