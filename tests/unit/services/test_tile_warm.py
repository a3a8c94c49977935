"""Warming the proof cache (docs/tiles.md, "Proofs from memory") on a tree too large to build here: a
store that answers every full tile's row asked for, and records the order they were asked in."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Sequence
from typing import Any, cast

from trustscore.ledger import tiles
from trustscore.services.tiles import WARM_BATCH, TileService
from trustscore.store.log import LogStore, StoredCheckpoint

SIZE = 70_000  # level-0 tiles 0..272 full (273 partial); level-1 tile 0 full (65,536 leaves)


def row(key: tuple[int, int]) -> bytes:
    seed = repr(key).encode()
    data = b"".join(hashlib.sha256(seed + bytes([i])).digest() for i in range(tiles.WIDTH))
    return tiles.encode_subtree(tiles.tile_subtree(data))


class EveryRow:
    """A log of SIZE entries whose every full tile has its stored row."""

    def __init__(self, size: int = SIZE) -> None:
        self.size = size
        self.asked: list[list[tuple[int, int]]] = []

    async def latest_checkpoint(self) -> StoredCheckpoint:
        return StoredCheckpoint(self.size, b"\0" * 32, "")

    async def full_tile_subtrees(self, keys: Sequence[tuple[int, int]]) -> dict[tuple[int, int], bytes]:
        self.asked.append(list(keys))
        return {key: row(key) for key in keys}


def service(store: EveryRow, full_tiles: int) -> TileService:
    return TileService(cast(LogStore, store), cache_bytes=full_tiles * tiles.FULL_SUBTREE_BYTES + 100)


async def test_the_newest_leaf_tiles_first_each_with_its_full_ancestors() -> None:
    store = EveryRow()
    svc = service(store, 1000)
    assert await svc.warm() == 1 + 273
    asked = [k for batch in store.asked for k in batch]
    # leaf tiles 256..272 lie under level-1 tile 1, which is not full; tile 0 is, and comes with leaf 255
    assert asked == [(0, i) for i in range(272, 255, -1)] + [(1, 0)] + [(0, i) for i in range(255, -1, -1)]
    assert all(len(batch) <= WARM_BATCH + 1 for batch in store.asked)  # 64 level-0 tiles and (1, 0)
    order = list(svc._subtrees)  # coldest first: the oldest leaf tile; the ancestor above its leaves
    assert order[0] == (0, 0) and order.index((1, 0)) == 256 and order[-1] == (0, 272)
    assert svc._subtrees[(0, 7)] == tiles.decode_subtree(row((0, 7)))


async def test_a_huge_log_warms_leaf_tiles_not_only_upper_levels() -> None:
    """Upper levels first would fill a small cache with level-1 tiles alone on a log of 10^9 entries
    (3,906,250 level-0 tiles, 15,258 level-1): no proof would need one query less."""
    store = EveryRow(size=10**9)
    svc = service(store, 100)
    assert await svc.warm() == 100
    levels = [level for level, _ in svc._subtrees]
    assert levels.count(0) >= 98 and levels.count(1) <= 1 and levels.count(2) <= 1


async def test_no_more_rows_are_asked_than_the_cache_can_hold() -> None:
    store = EveryRow()
    svc = service(store, 10)
    assert await svc.warm() == 10
    assert sorted(svc._subtrees) == [(0, i) for i in range(263, 273)]
    assert sum(len(batch) for batch in store.asked) == 10
    store.asked.clear()
    assert await svc.warm() == 0  # full: no query at all
    assert store.asked == []


async def test_a_second_warming_loads_only_the_tiles_made_full_since() -> None:
    store = EveryRow()
    svc = service(store, 1000)
    await svc.warm()
    store.size += 3 * tiles.WIDTH
    store.asked.clear()
    assert await svc.warm() == 3
    assert store.asked == [[(0, 275), (0, 274), (0, 273)]]


async def test_a_log_without_a_checkpoint_or_a_full_tile_loads_nothing() -> None:
    class Empty(EveryRow):
        async def latest_checkpoint(self) -> Any:
            return None

    assert await service(Empty(), 10).warm() == 0
    small = EveryRow(size=tiles.WIDTH - 1)
    assert await service(small, 10).warm() == 0
    assert small.asked == []


async def test_looking_over_a_full_cache_lets_the_event_loop_run() -> None:
    """Once the whole log is held, a top-up finds nothing to load but still looks over every tile: in
    turns, so that a cache of millions of tiles does not stall the requests for seconds."""
    store = EveryRow(size=5_000 * tiles.WIDTH)
    svc = service(store, 6_000)
    subtree = tiles.decode_subtree(row((0, 0)))
    for i in range(5_000):  # held already (the same hashes for each: only their widths are looked at)
        svc._subtrees[(0, i)] = subtree
    for i in range(5_000 // tiles.WIDTH):  # and their full ancestors
        svc._subtrees[(1, i)] = subtree
    svc._subtree_bytes = len(svc._subtrees) * tiles.FULL_SUBTREE_BYTES
    turns = 0

    async def ticker() -> None:
        nonlocal turns
        while True:
            turns += 1
            await asyncio.sleep(0)

    task = asyncio.create_task(ticker())
    await asyncio.sleep(0)
    assert await svc.warm() == 0 and store.asked == []
    task.cancel()
    assert turns >= 5_000 // WARM_BATCH


async def test_each_warmed_ancestor_is_warmer_than_the_tiles_under_it_at_every_level() -> None:
    store = EveryRow(size=2**24)  # level-0 tiles 0..65535, level-1 0..255 and level-2 tile 0 all full
    svc = service(store, 10)
    assert await svc.warm() == 10
    order = list(svc._subtrees)  # coldest first
    assert order[-3:] == [(0, 65535), (1, 255), (2, 0)]
