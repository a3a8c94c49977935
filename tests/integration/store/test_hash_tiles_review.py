"""Review of migration 0018 (hash_tiles): edge cases of the writers and of fsck."""

from __future__ import annotations

import hashlib

import asyncpg
import msgspec
import pytest

from tests.helpers import new_card
from tests.integration.store.test_fsck_database import VERIFIER, sign
from trustscore.ledger import tiles
from trustscore.ledger.submission import check, prepare
from trustscore.services.audit import fsck_database
from trustscore.store import db
from trustscore.store.log import LogStore, hash_tile_problems


def h(level: int, idx: int) -> bytes:
    return hashlib.sha256(f"{level}/{idx}".encode()).digest()


def tile_node_ids(level: int, n: int) -> list[tuple[int, int]]:
    return [(8 * level + k, i) for k in range(8) for i in range((n << 8) >> k, ((n + 1) << 8) >> k)]


async def test_level_two_rows_at_exactly_256_cubed(dsn: str) -> None:
    """A batch ending at 2^24 completes tiles at three levels at once: (0, 65535), (1, 255), (2, 0)."""
    await db.migrate(dsn)
    done = tiles.full_tiles_between(2**24 - 1, 2**24)
    assert done == [(0, 65535), (1, 255), (2, 0)]
    ids = [i for lv, n in done for i in tile_node_ids(lv, n)]
    conn = await asyncpg.connect(dsn)
    try:
        async with conn.transaction():
            await conn.copy_records_to_table(
                "tree_nodes", columns=["level", "idx", "hash"], records=[(*i, h(*i)) for i in ids]
            )
            await LogStore.write_full_tiles(conn, 2**24 - 1, 2**24)
        rows = {
            (r["level"], r["idx"]): bytes(r["subtree"]) for r in await conn.fetch("SELECT * FROM hash_tiles")
        }
        # fsck's aggregation groups the same nodes into the same rows
        assert await hash_tile_problems(conn) == []
    finally:
        await conn.close()
    assert rows == {(lv, n): b"".join(h(*i) for i in tile_node_ids(lv, n)) for lv, n in done}


class OldIntegrator(LogStore):
    """An integrator of the release before 0018, still running after the migration committed
    (a rolling upgrade: docs/tiles.md asks to upgrade integrators 'with' the migration)."""

    @staticmethod
    async def write_full_tiles(conn: object, old_size: int, new_size: int) -> None:
        return None


async def test_regression_an_old_integrator_after_the_migration_cannot_leave_a_full_tile_without_a_row(
    dsn: str,
) -> None:
    """A rolling upgrade: an integrator of the release before 0018 runs a batch after the migration
    committed. Before the fix its batch committed nodes without the row of the tile it made full, and
    fsck reported that good log for ever (nothing writes a missing row again)."""
    await db.migrate(dsn)
    pool = await db.create_pool(dsn, min_size=1, max_size=2)
    try:
        old, new = OldIntegrator(pool), LogStore(pool)
        cards = [prepare(msgspec.to_builtins(new_card(f"o{i}")[1])) for i in range(600)]
        await new.append([check(p, lambda _k: None) for p in cards[:100]])
        assert await old.integrate(sign, max_batch=1000) is not None  # no tile made full: allowed
        await new.append([check(p, lambda _k: None) for p in cards[100:]])
        with pytest.raises(asyncpg.IntegrityConstraintViolationError, match="no row in hash_tiles"):
            await old.integrate(sign, max_batch=1000)  # would make tiles 0/0 and 0/1 full
        assert await new.integrate(sign, max_batch=1000) is not None  # the upgraded one redoes the batch
        assert await pool.fetchval("SELECT count(*) FROM hash_tiles") == 2
    finally:
        await pool.close()
    report = await fsck_database(dsn, VERIFIER)
    assert report.clean, report.problems


async def test_a_replica_before_the_migration_serves_full_tiles_from_the_nodes(dsn: str) -> None:
    """The UndefinedTableError fallback (a replica that has not replayed 0018): no rows, same bytes."""
    from trustscore.services.tiles import TileService

    await db.migrate(dsn, until=17)
    ids = tile_node_ids(0, 0) + tile_node_ids(0, 1)
    conn = await asyncpg.connect(dsn)
    try:
        await conn.copy_records_to_table(
            "tree_nodes", columns=["level", "idx", "hash"], records=[(*i, h(*i)) for i in ids]
        )
    finally:
        await conn.close()
    pool = await db.create_pool(dsn, min_size=1, max_size=2, read_only=True)
    try:
        store = LogStore(pool)
        assert await store.full_tile_subtrees([(0, 0)]) == {}
        assert await store.full_tile_subtrees([(0, 0), (0, 1)]) == {}
        _, data, _ = await TileService(store).tile("tile/0/001")
        assert data == b"".join(h(0, i) for i in range(256, 512))
    finally:
        await pool.close()
