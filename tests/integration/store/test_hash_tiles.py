"""Full hash tiles stored pre-folded (migration 0018, docs/tiles.md): the integrator's rows, and the
migration's backfill, equal the subtree folded from the leaves; the rows never change; proofs and /tile
bytes are identical with and without them; fsck finds a row that disagrees with the tree nodes."""

from __future__ import annotations

import hashlib
import random
from collections.abc import AsyncIterator, Sequence

import asyncpg
import msgspec
import pytest

from tests.helpers import new_card
from tests.integration.store.test_fsck_database import VERIFIER, sign
from trustscore.ledger import merkle, tiles
from trustscore.ledger.submission import check, prepare
from trustscore.services.audit import fsck_database
from trustscore.services.tiles import TileService
from trustscore.store import db
from trustscore.store.log import LogStore

# Appends and integrator batches of odd sizes, so tiles complete across batch boundaries.
APPENDS = [97, 300, 13, 256, 511, 140]
MAX_BATCH = 173
SIZE = sum(APPENDS)  # 1317: level-0 tiles 0..4 full, tile 5 partial (37), level-1 tile 0 partial (5)


def folded(leaf_hashes: Sequence[bytes]) -> bytes:
    """A full tile's stored row, computed from its 256 leaf hashes alone (no store involved)."""
    return tiles.encode_subtree(tiles.tile_subtree(b"".join(leaf_hashes)))


async def stored_rows(conn: asyncpg.Connection | asyncpg.Pool) -> dict[tuple[int, int], bytes]:
    rows = await conn.fetch("SELECT level, idx, subtree FROM hash_tiles ORDER BY level, idx")
    return {(r["level"], r["idx"]): bytes(r["subtree"]) for r in rows}


class OldPath(LogStore):
    """The store as it was before migration 0018: no full tile has a stored row."""

    async def full_tile_subtrees(self, keys: Sequence[tuple[int, int]]) -> dict[tuple[int, int], bytes]:
        return {}


class RowsRead(LogStore):
    """The real store, counting the stored rows proofs read."""

    rows = 0

    async def full_tile_subtrees(self, keys: Sequence[tuple[int, int]]) -> dict[tuple[int, int], bytes]:
        got = await super().full_tile_subtrees(keys)
        self.rows += len(got)
        return got


@pytest.fixture
async def grown(dsn: str) -> AsyncIterator[tuple[asyncpg.Pool, list[int]]]:
    """A log of SIZE entries grown in odd appends and integrator batches; the checkpoint sizes."""
    await db.migrate(dsn)
    pool = await db.create_pool(dsn, min_size=1, max_size=4)
    store = LogStore(pool)
    n = 0
    sizes = []
    for count in APPENDS:
        cards = [prepare(msgspec.to_builtins(new_card(f"t{i}")[1])) for i in range(n, n + count)]
        await store.append([check(p, lambda _k: None) for p in cards])
        n += count
        while (cp := await store.integrate(sign, max_batch=MAX_BATCH)) is not None:
            sizes.append(cp.size)
    assert sizes[-1] == SIZE
    yield pool, sizes
    await pool.close()


async def test_integrated_rows_equal_the_subtrees_folded_from_the_leaves(
    grown: tuple[asyncpg.Pool, list[int]],
) -> None:
    pool, _ = grown
    leaves = [e.leaf_hash for e in await LogStore(pool).entries(0, SIZE)]
    rows = await stored_rows(pool)
    assert set(rows) == {(0, n) for n in range(SIZE // 256)}  # full tiles only, each once
    for (_, n), row in rows.items():
        assert row == folded(leaves[256 * n : 256 * n + 256])


async def test_proofs_and_tiles_are_identical_with_and_without_the_rows(
    grown: tuple[asyncpg.Pool, list[int]],
) -> None:
    pool, sizes = grown
    leaves = [e.leaf_hash for e in await LogStore(pool).entries(0, SIZE)]
    new_store = RowsRead(pool)
    # A cache smaller than one folded tile: every proof reads its tiles again.
    new, old = TileService(new_store, cache_bytes=64 * 32), TileService(OldPath(pool), cache_bytes=64 * 32)
    rng = random.Random(16)
    for size in sizes:
        for index in {0, size - 1, *(rng.randrange(size) for _ in range(8))}:
            ranges = merkle.inclusion_proof_ranges(index, size)
            ids = merkle.required_nodes(ranges)
            got = await new.proof_nodes(ids, size, new_store)
            assert got == await old.proof_nodes(ids, size, old.reads)
            assert merkle.assemble(ranges, got) == merkle.inclusion_proof(index, size, leaves[:size])
        for old_size in {1, size // 3, *(rng.randint(1, size) for _ in range(4))}:  # 2 full tiles at once
            ranges = merkle.consistency_proof_ranges(old_size, size)
            ids = merkle.required_nodes(ranges)
            got = await new.proof_nodes(ids, size, new_store)
            assert got == await old.proof_nodes(ids, size, old.reads)
            assert merkle.assemble(ranges, got) == merkle.consistency_proof(old_size, size, leaves[:size])
    assert new_store.rows > 0  # the stored rows did answer
    nodes = merkle.complete_nodes(leaves)
    for tile in tiles.all_tiles(SIZE) + tiles.all_tiles(sizes[len(sizes) // 2]):
        served = await new.tile(tile.path())
        assert served == await old.tile(tile.path())
        assert served[1] == b"".join(nodes[n] for n in tiles.tile_nodes(tile))


async def test_rows_never_change(grown: tuple[asyncpg.Pool, list[int]], dsn: str) -> None:
    pool, _ = grown
    before = await stored_rows(pool)
    conn = await asyncpg.connect(dsn)  # the migrating owner, not the app role
    try:
        for sql in (
            "UPDATE hash_tiles SET subtree = subtree",
            "DELETE FROM hash_tiles",
            "TRUNCATE hash_tiles",
        ):
            with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
                await conn.execute(sql)
        if await conn.fetchval("SELECT 1 FROM pg_roles WHERE rolname = $1", db.APP_ROLE):
            can = await conn.fetch(
                "SELECT p, has_table_privilege($1, 'hash_tiles', p) AS ok "
                "FROM unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE']) AS p",
                db.APP_ROLE,
            )
            assert {r["p"]: r["ok"] for r in can} == {
                "SELECT": True,
                "INSERT": True,
                "UPDATE": False,
                "DELETE": False,
                "TRUNCATE": False,
            }
    finally:
        await conn.close()
    # The log grows on: the rows already stored stay as they were.
    store = LogStore(pool)
    cards = [prepare(msgspec.to_builtins(new_card(f"u{i}")[1])) for i in range(300)]
    await store.append([check(p, lambda _k: None) for p in cards])
    assert await store.integrate(sign, max_batch=1000) is not None
    after = await stored_rows(pool)
    assert {k: after[k] for k in before} == before and len(after) == len(before) + 1


def synthetic_tree(n: int) -> dict[merkle.NodeId, bytes]:
    leaves = [hashlib.sha256(i.to_bytes(8, "big")).digest() for i in range(n)]
    return merkle.complete_nodes(leaves)


@pytest.mark.parametrize("writer", ["backfill", "integrator"])
async def test_level_one_rows_from_the_backfill_and_the_integrator(dsn: str, writer: str) -> None:
    """Both writers of the rows (the migration over an existing tree, the integrator's batches) store
    the same bytes, at level 0 and level 1, as folding the leaves does."""
    n = 65536 + 300  # level-1 tile 0 full
    nodes = synthetic_tree(n)
    await db.migrate(dsn, until=17 if writer == "backfill" else None)
    conn = await asyncpg.connect(dsn)
    try:
        async with conn.transaction():
            await conn.copy_records_to_table(
                "tree_nodes", columns=["level", "idx", "hash"], records=[(*k, h) for k, h in nodes.items()]
            )
            if writer == "integrator":  # two batches, the second completing a tile the first began
                await LogStore.write_full_tiles(conn, 0, 1000)
                await LogStore.write_full_tiles(conn, 1000, n)
        if writer == "backfill":
            assert (await db.migrate(dsn))[:1] == ["0018_hash_tiles.sql"]
        rows = await stored_rows(conn)
    finally:
        await conn.close()
    want = {(0, i): folded([nodes[0, j] for j in range(256 * i, 256 * i + 256)]) for i in range(n // 256)}
    want[1, 0] = folded([nodes[8, j] for j in range(256)])
    assert rows.keys() == want.keys()
    assert rows == want


@pytest.mark.parametrize(
    ("tamper", "problem"),
    [
        (
            "UPDATE hash_tiles SET subtree = set_byte(subtree, 16000, get_byte(subtree, 16000) # 1) WHERE idx = 1",
            "hash tile 0/1: its stored row differs",
        ),
        ("DELETE FROM hash_tiles WHERE idx = 2", "hash tile 0/2: the full tile has no stored row"),
        (
            "INSERT INTO hash_tiles SELECT 0, 5, subtree FROM hash_tiles WHERE idx = 0",
            "hash tile 0/5: a stored row, but the tile is not full",
        ),
    ],
)
async def test_fsck_finds_a_row_that_disagrees_with_the_tree(
    grown: tuple[asyncpg.Pool, list[int]], dsn: str, tamper: str, problem: str
) -> None:
    report = await fsck_database(dsn, VERIFIER)
    assert report.clean, report.problems
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("ALTER TABLE hash_tiles DISABLE TRIGGER USER")
        await conn.execute(tamper)
    finally:
        await conn.close()
    report = await fsck_database(dsn, VERIFIER)
    assert not report.clean
    found = [p for p in report.problems if p.startswith("hash tile")]
    assert len(found) == 1 and found[0].startswith(problem), report.problems


async def test_one_query_reads_the_rows_of_several_tiles(grown: tuple[asyncpg.Pool, list[int]]) -> None:
    pool, _ = grown
    store = LogStore(pool)
    rows = await stored_rows(pool)
    assert await store.full_tile_subtrees([(0, 3)]) == {(0, 3): rows[0, 3]}
    assert await store.full_tile_subtrees([(0, 4), (0, 1), (0, 5), (1, 0)]) == {
        k: rows[k] for k in [(0, 4), (0, 1)]
    }
    assert await store.full_tile_subtrees([(0, 5)]) == {}  # partial: no row


async def test_fsck_finds_the_table_missing_where_its_migration_is_recorded(
    grown: tuple[asyncpg.Pool, list[int]], dsn: str
) -> None:
    """A partial restore without hash_tiles is not taken for an older schema: the integrator would fail."""
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute("DROP TABLE hash_tiles")
    finally:
        await conn.close()
    report = await fsck_database(dsn, VERIFIER)
    assert "migration 0018 is recorded as applied, but the table hash_tiles is missing" in report.problems
