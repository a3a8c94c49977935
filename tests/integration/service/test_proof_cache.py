"""Proofs come from the tiles the service keeps folded in memory: each equals the proof computed from
the leaves, a repeated proof costs no query, a cold one one query for the stored rows of all its missing
full tiles and one for the nodes of the rest (partial tiles), and a tree
that grew is answered from its wider tiles, never from a narrower tile that lacks the node."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Sequence

import msgspec
import pytest

from tests.helpers import new_card
from trustscore.errors import NotYetAvailable
from trustscore.ledger import keys, merkle, tiles
from trustscore.services.log import LogService
from trustscore.store import db
from trustscore.store.log import LogStore, StoredCheckpoint

ENTRIES = 700  # level-0 tiles 0 and 1 full, tile 2 partial; a level-1 tile of width 2


class CountingStore(LogStore):
    """The real store, counting the queries a proof makes."""

    queries = 0
    rows_asked = 0  # full tiles whose stored rows were asked for

    async def node_runs(self, runs: Sequence[tuple[int, int, int]]) -> list[bytes]:
        self.queries += 1
        return await super().node_runs(runs)

    async def full_tile_subtrees(self, keys: Sequence[tuple[int, int]]) -> dict[tuple[int, int], bytes]:
        self.queries += bool(keys)  # no keys, no query
        self.rows_asked += len(keys)
        return await super().full_tile_subtrees(keys)

    async def latest_checkpoint(self) -> StoredCheckpoint | None:
        self.queries += 1
        return await super().latest_checkpoint()


@pytest.fixture
async def service(dsn: str) -> AsyncIterator[LogService]:
    await db.migrate(dsn)
    pool = await db.create_pool(dsn, min_size=1, max_size=4)
    svc = LogService(CountingStore(pool), keys.SigningKey.generate(), "test.example/log", max_batch=100)
    for start in range(0, ENTRIES, 100):
        batch = [new_card(f"agent{i}")[1] for i in range(start, start + 100)]
        await svc.submit(msgspec.json.encode(batch))
    yield svc
    await pool.close()


def queries(svc: LogService) -> int:
    assert isinstance(svc.store, CountingStore)
    return svc.store.queries


async def test_proofs_equal_the_leaves_and_repeat_without_queries(service: LogService) -> None:
    await service.integrate_once(max_batch=300)
    leaves = [e.leaf_hash for e in await service.store.entries(0, ENTRIES)]
    with pytest.raises(NotYetAvailable):
        await service.inclusion_proof(0, 301)

    before = queries(service)
    assert await service.inclusion_proof(290, 300) == merkle.inclusion_proof(290, 300, leaves[:300])
    assert queries(service) - before <= 2  # the checkpoint once, then one query for the partial tiles
    before = queries(service)
    for index in (290, 291, 299, 256):  # the same tiles: pure CPU
        assert await service.inclusion_proof(index, 300) == merkle.inclusion_proof(index, 300, leaves[:300])
    assert queries(service) == before

    # The tree grows: tile 1 was folded at width 44; size 700 needs it whole, and a level-1 tile.
    await service.integrate_pending()
    rng = random.Random(7)
    for _ in range(40):
        size = rng.randint(1, ENTRIES)
        index = rng.randrange(size)
        old = rng.randint(0, size)
        assert await service.inclusion_proof(index, size) == merkle.inclusion_proof(
            index, size, leaves[:size]
        )
        assert await service.consistency_proof(old, size) == merkle.consistency_proof(
            old, size, leaves[:size]
        )
    assert await service.consistency_proof(1, 700) == merkle.consistency_proof(1, 700, leaves)
    before = queries(service)  # every tile of the tree of 700 is held now, as wide as it has it
    for index in (0, 290, 511, 699):
        assert await service.inclusion_proof(index, 700) == merkle.inclusion_proof(index, 700, leaves)
    assert await service.consistency_proof(300, 700) == merkle.consistency_proof(300, 700, leaves)
    # /tile answers from the same folded tiles: tile 1 as it was at size 300, and tile 2 at 700.
    for tile in (tiles.Tile(0, 1, 44), tiles.Tile(0, 2, 188), tiles.Tile(1, 0, 2)):
        got = await service.tiles.tile(tile.path())
        nodes = merkle.complete_nodes(leaves)
        assert got == (tile, b"".join(nodes[n] for n in tiles.tile_nodes(tile)), False)
    assert queries(service) == before


async def test_proofs_stay_exact_when_the_cache_holds_almost_nothing(service: LogService) -> None:
    await service.integrate_pending()
    leaves = [e.leaf_hash for e in await service.store.entries(0, ENTRIES)]
    service.tiles.cache_bytes = 64 * 32  # less than one folded full tile: every proof reads its tiles
    for index in range(0, ENTRIES, 37):
        assert await service.inclusion_proof(index, ENTRIES) == merkle.inclusion_proof(index, ENTRIES, leaves)
    assert await service.consistency_proof(1, ENTRIES) == merkle.consistency_proof(1, ENTRIES, leaves)


async def test_a_tile_crawl_does_not_evict_the_tiles_folded_for_proofs(service: LogService) -> None:
    """/tile of a full tile reads its stored row for the answer only: a mirror listing every tile must
    not push out of the proofs' cache the tiles that make repeated proofs cheap."""
    await service.integrate_pending()
    leaves = [e.leaf_hash for e in await service.store.entries(0, ENTRIES)]
    assert await service.inclusion_proof(5, ENTRIES) == merkle.inclusion_proof(5, ENTRIES, leaves)
    held = dict(service.tiles._subtrees)
    nodes = merkle.complete_nodes(leaves)
    got = await service.tiles.tile(tiles.Tile(0, 1, tiles.WIDTH).path())  # full, not held for proofs
    assert got[1] == b"".join(nodes[n] for n in tiles.tile_nodes(tiles.Tile(0, 1, tiles.WIDTH)))
    assert service.tiles._subtrees == held


def accounted(svc: LogService) -> bool:
    """The proof cache's byte count is the bytes it holds."""
    return svc.tiles._subtree_bytes == sum(sum(map(len, s)) for s in svc.tiles._subtrees.values())


def rows_asked(svc: LogService) -> int:
    assert isinstance(svc.store, CountingStore)
    return svc.store.rows_asked


async def test_a_warmed_cache_answers_proofs_without_reading_a_full_tile(service: LogService) -> None:
    svc = service
    await svc.integrate_pending()
    leaves = [e.leaf_hash for e in await svc.store.entries(0, ENTRIES)]
    assert await svc.tiles.warm() == 2  # level-0 tiles 0 and 1; no level-1 tile is full yet
    assert list(svc.tiles._subtrees) == [(0, 0), (0, 1)]  # the older tile at the cold end
    asked = rows_asked(svc)
    for index in range(0, ENTRIES, 23):
        assert await svc.inclusion_proof(index, ENTRIES) == merkle.inclusion_proof(index, ENTRIES, leaves)
    assert rows_asked(svc) == asked  # only the partial tiles were read, from their nodes
    assert await svc.tiles.warm() == 0  # nothing more to load: no second read of a held tile
    assert rows_asked(svc) == asked
    assert accounted(svc)


async def test_warming_fills_only_the_free_room_newest_first(service: LogService) -> None:
    svc = service
    await svc.integrate_pending()
    svc.tiles.cache_bytes = tiles.FULL_SUBTREE_BYTES + 100  # room for one full tile
    assert await svc.tiles.warm() == 1
    assert list(svc.tiles._subtrees) == [(0, 1)]  # the newest
    leaves = [e.leaf_hash for e in await svc.store.entries(0, ENTRIES)]
    assert await svc.inclusion_proof(5, ENTRIES) == merkle.inclusion_proof(5, ENTRIES, leaves)
    held = list(svc.tiles._subtrees)  # the proof's tiles, within the budget
    assert await svc.tiles.warm() == 0  # no free room: nothing held is evicted for a warmed tile
    assert list(svc.tiles._subtrees) == held
    assert accounted(svc)


async def test_warming_widens_a_tile_held_while_it_was_partial(service: LogService) -> None:
    svc = service
    await svc.integrate_once(max_batch=300)  # a checkpoint at 300: tile 1 holds 44 leaves
    leaves = [e.leaf_hash for e in await svc.store.entries(0, ENTRIES)]
    assert await svc.inclusion_proof(290, 300) == merkle.inclusion_proof(290, 300, leaves[:300])
    assert len(svc.tiles._subtrees[(0, 1)][0]) == 44 * merkle.HASH_SIZE
    await svc.integrate_pending()
    assert await svc.tiles.warm() == 2  # tile 0, and tile 1 (held at width 44), now full
    assert len(svc.tiles._subtrees[(0, 1)][0]) == tiles.WIDTH * merkle.HASH_SIZE
    assert accounted(svc)
    for index in (0, 290, 511, 699):
        assert await svc.inclusion_proof(index, ENTRIES) == merkle.inclusion_proof(index, ENTRIES, leaves)
