"""Warming the proof cache (docs/tiles.md, "Proofs from memory") on a tree too large to build here: a
store that answers every full tile's row asked for, and records the order they were asked in."""

from __future__ import annotations

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


async def test_upper_levels_first_then_the_newest_leaf_tiles_in_batches() -> None:
    store = EveryRow()
    svc = service(store, 1000)
    assert await svc.warm() == 1 + 273
    assert store.asked[0] == [(1, 0)]
    assert store.asked[1] == [(0, i) for i in range(272, 272 - WARM_BATCH, -1)]
    assert [k for batch in store.asked[1:] for k in batch] == [(0, i) for i in range(272, -1, -1)]
    # the oldest leaf tile is the coldest, the level-1 tile (in every proof) the warmest
    order = list(svc._subtrees)
    assert order[0] == (0, 0) and order[-1] == (1, 0)
    assert svc._subtrees[(0, 7)] == tiles.decode_subtree(row((0, 7)))


async def test_no_more_rows_are_asked_than_the_cache_can_hold() -> None:
    store = EveryRow()
    svc = service(store, 10)
    assert await svc.warm() == 10
    assert sorted(svc._subtrees) == [(0, i) for i in range(264, 273)] + [(1, 0)]
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
