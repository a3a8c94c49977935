"""The log as C2SP tlog-tiles (docs/tiles.md): the latest checkpoint, hash tiles and entry bundles,
read from the stored tree nodes and entries. A tile of a given width never changes (a partial tile is a
prefix of every wider one), so every tile served is kept in a bounded in-process LRU cache.
"""

from __future__ import annotations

import asyncio
import gzip
import logging
import time
from collections import OrderedDict
from collections.abc import Iterable

from trustscore.errors import NotFound, NotYetAvailable
from trustscore.ledger import merkle, tiles
from trustscore.ledger.tiles import HEIGHT, Subtree, Tile
from trustscore.store.log import LogStore

log = logging.getLogger(__name__)

DEFAULT_CACHE_BYTES = 64 * 1024 * 1024
MAX_LEVELS = 8  # tile levels of a log of up to 2**64 entries
WARM_BATCH = 64  # level-0 tiles looked at per turn when warming the proof cache (rows: ~1 MiB a query)
MAX_LEAVES = 2**63  # log indexes are PostgreSQL bigints


class TileTooLarge(NotFound):
    """An entry bundle holding an entry longer than the uint16 length prefix of tlog-tiles allows."""

    code = "entry-too-large-for-tiles"
    title = "Entry too large for a tlog-tiles entry bundle"


class TileService:
    """Serve tiles of the tree of the latest checkpoint (any width up to it) from ``reads`` (a streaming
    replica's store, or the primary's); a tile the replica has not replayed yet comes from ``primary``,
    as :class:`~trustscore.services.log.LogService` does for proofs (docs/operations.md)."""

    def __init__(
        self, reads: LogStore, primary: LogStore | None = None, cache_bytes: int = DEFAULT_CACHE_BYTES
    ) -> None:
        self.reads = reads
        self.stores = [reads] if primary is None or primary is reads else [reads, primary]
        self.cache_bytes = cache_bytes
        self._cache: OrderedDict[tuple[Tile, bool], bytes] = OrderedDict()  # (tile, gzipped) -> bytes
        self._cached = 0
        # Hash tiles folded for proofs, by (level, index): the widest seen (a narrower one is its prefix).
        self._subtrees: OrderedDict[tuple[int, int], Subtree] = OrderedDict()
        self._subtree_bytes = 0
        self._warmed = False

    async def checkpoint(self) -> str:
        """The latest signed checkpoint note."""
        cp = await self.reads.latest_checkpoint()
        if cp is None:
            raise NotYetAvailable("no checkpoint has been signed yet")
        return cp.signed_note

    async def tile(self, path: str, *, gzip_ok: bool = False) -> tuple[Tile, bytes, bool]:
        """The tile at ``path`` (``tile/...``), its bytes, and whether they are gzipped (entry bundles
        only, when ``gzip_ok``: the spec asks bundles to be compressed); 404 beyond the latest checkpoint.
        """
        tile = tiles.parse_path(path)
        gz = gzip_ok and tile.is_entries
        if (data := self._cached_bytes(tile, gz)) is not None:
            return tile, data, gz
        data = self._cached_bytes(tile, False)
        if data is None:
            data = await (self._bundle(tile) if tile.is_entries else self._hashes(tile))
            self._keep((tile, False), data)  # a tile of a given width never changes, partial or full
        if gz:
            data = await asyncio.to_thread(gzip.compress, data, 6, mtime=0)  # deterministic bytes
            self._keep((tile, True), data)
        return tile, data, gz

    def _cached_bytes(self, tile: Tile, gz: bool) -> bytes | None:
        data = self._cache.get((tile, gz))
        if data is not None:
            self._cache.move_to_end((tile, gz))
        return data

    async def _hashes(self, tile: Tile) -> bytes:
        # Tree nodes are written with the checkpoint that covers them, in one transaction: a tile whose
        # nodes all exist is within the latest checkpoint, and one query answers both.
        if (tile.index + 1) << (tile.hash_level() + tiles.HEIGHT) > MAX_LEAVES:
            # a well-formed path of a tile no log can have (log indexes are bigints): no query for it
            raise NotYetAvailable(f"{tile.path()} is beyond the latest checkpoint")
        held = self._subtrees.get((tile.level or 0, tile.index))  # folded for a proof, as wide or wider
        if held is not None and len(held[0]) >= tile.width * merkle.HASH_SIZE:
            return held[0][: tile.width * merkle.HASH_SIZE]
        for store in self.stores:
            subtree = (await self._stored_subtrees([tile], store)).get(tile)
            if subtree is not None:  # not kept for proofs: a mirror's crawl must not evict their tiles
                return subtree[0]
            if data := await self._hash_tiles([tile], store):
                return data[tile]
        raise NotYetAvailable(f"{tile.path()} is beyond the latest checkpoint")

    async def _bundle(self, tile: Tile) -> bytes:
        size = 0
        for store in self.stores:
            cp = await store.latest_checkpoint()
            size = 0 if cp is None else cp.size
            if tiles.width_at(0, tile.index, size) >= tile.width:
                break
        else:
            have = tiles.width_at(0, tile.index, size)
            raise NotYetAvailable(
                f"{tile.path()} is beyond the latest checkpoint (size {size}"
                + (f", where it has width {have})" if have else ")")
            )
        start = tiles.WIDTH * tile.index
        rows = await store.entries(start, start + tile.width)
        for r in rows:
            if len(r.leaf) > tiles.MAX_ENTRY:
                raise TileTooLarge(
                    f"entry {r.index} is {len(r.leaf)} bytes, more than the {tiles.MAX_ENTRY} a tlog-tiles "
                    f"entry bundle can carry: fetch it from /v1/log/entries?start={r.index}&end={r.index + 1}"
                )
        return tiles.encode_bundle([r.leaf for r in rows])

    async def proof_nodes(
        self, ids: Iterable[merkle.NodeId], size: int, store: LogStore
    ) -> dict[merkle.NodeId, bytes]:
        """The hashes of stored nodes ``ids``, each complete in the tree of ``size``, from the hash tiles
        kept folded in memory; the tiles missing are read from ``store`` (whose latest checkpoint covers
        ``size``): full ones pre-folded, one row each, in one query; partial ones (and full ones without
        a row) from their nodes in another. A node whose tile ``store`` does not hold whole is left out."""
        out: dict[merkle.NodeId, bytes] = {}
        missing: dict[Tile, list[merkle.NodeId]] = {}
        for node in ids:
            level, index = node
            key = (level // HEIGHT, (index << (level % HEIGHT)) >> HEIGHT)
            held = self._subtrees.get(key)
            if held is not None and (h := tiles.node_in_subtree(node, key[1], held)) is not None:
                self._subtrees.move_to_end(key)
                out[node] = h
            else:
                missing.setdefault(tiles.node_tile(node, size), []).append(node)
        if missing:
            subtrees = await self._stored_subtrees(
                [t for t in missing if self._cached_bytes(t, False) is None], store
            )
            rest = [t for t in missing if t not in subtrees]
            subtrees.update(
                (t, tiles.tile_subtree(data)) for t, data in (await self._hash_tiles(rest, store)).items()
            )
            for tile, subtree in subtrees.items():
                self._keep_subtree(tile, subtree)
                for node in missing[tile]:
                    if (h := tiles.node_in_subtree(node, tile.index, subtree)) is not None:
                        out[node] = h
        return out

    async def _stored_subtrees(self, wanted: list[Tile], store: LogStore) -> dict[Tile, Subtree]:
        """The subtrees of the full tiles among ``wanted`` that ``store`` keeps pre-folded (one query)."""
        full = {(t.level or 0, t.index): t for t in wanted if t.full}
        rows = await store.full_tile_subtrees(list(full))
        return {full[key]: tiles.decode_subtree(data) for key, data in rows.items()}

    async def _hash_tiles(self, wanted: list[Tile], store: LogStore) -> dict[Tile, bytes]:
        """The bytes of the hash tiles ``wanted`` that ``store`` holds whole (cached ones first; the rest
        in one query)."""
        out = {t: data for t in wanted if (data := self._cached_bytes(t, False)) is not None}
        rest = [t for t in wanted if t not in out]
        runs = await store.node_runs([(t.hash_level(), tiles.WIDTH * t.index, t.width) for t in rest])
        out.update(
            (t, data) for t, data in zip(rest, runs, strict=True) if len(data) == t.width * merkle.HASH_SIZE
        )
        return out

    async def warm(self) -> int:
        """:meth:`_warm`, saying what it loaded (the first time, and whenever it loads anything)."""
        start = time.monotonic()
        loaded = await self._warm()
        if loaded or not self._warmed:
            log.info(
                "proof cache warmed: %d full tiles loaded in %.1f s, %.0f of %.0f MiB held",
                loaded,
                time.monotonic() - start,
                self._subtree_bytes / 2**20,
                self.cache_bytes / 2**20,
            )
        self._warmed = True
        return loaded

    async def _warm(self) -> int:
        """Load the stored subtrees of the full hash tiles of the latest checkpoint's tree into the free
        part of the proof cache: the newest level-0 tiles first, each with its full ancestors (every
        proof of its entries reads them). A server that has just started then answers proofs of recent
        entries (and, while the cache can hold the whole log, of any entry) without a query each. Never
        evicts a tile held; the loaded tiles go to the cold end of the cache, the oldest coldest and each
        ancestor warmer than the tiles under it. Returns how many were loaded."""
        cp = await self.reads.latest_checkpoint()
        if cp is None:
            return 0
        capacity = self.cache_bytes // tiles.FULL_SUBTREE_BYTES
        full = [cp.size >> (HEIGHT * (level + 1)) for level in range(MAX_LEVELS)]  # full tiles per level
        index, visited, loaded = full[0], 0, 0
        while index > 0 and visited < capacity:
            wanted: list[tuple[int, int]] = []
            stop = max(0, index - WARM_BATCH)  # a batch of level-0 tiles, with the ancestors they need
            while index > stop and visited < capacity:
                index -= 1
                visited += 1  # the cache cannot hold more level-0 tiles than this: look at no more
                ancestors = []
                for level in range(1, MAX_LEVELS):
                    up = (level, index >> (HEIGHT * level))
                    if up[1] >= full[level]:
                        break  # not full, nor any tile above it
                    ancestors.append(up)
                for up in reversed(ancestors):  # the highest first: it ends up the warmest
                    if up not in wanted and not self._holds_full(up):
                        wanted.append(up)
                if not self._holds_full((0, index)):
                    wanted.append((0, index))
            if self._subtree_bytes + tiles.FULL_SUBTREE_BYTES > self.cache_bytes:
                return loaded
            rows = await self.reads.full_tile_subtrees(wanted) if wanted else {}
            for key in wanted:  # newest first: each one after goes before it, to the cold end
                data = rows.get(key)
                if data is None or self._holds_full(key):
                    continue
                if self._subtree_bytes + tiles.FULL_SUBTREE_BYTES > self.cache_bytes:
                    return loaded
                self._drop_subtree(key)
                self._subtrees[key] = tiles.decode_subtree(data)
                self._subtrees.move_to_end(key, last=False)
                self._subtree_bytes += tiles.FULL_SUBTREE_BYTES
                loaded += 1
            await asyncio.sleep(0)  # a cache of millions of held tiles is looked over in many turns
        return loaded

    def _holds_full(self, key: tuple[int, int]) -> bool:
        held = self._subtrees.get(key)
        return held is not None and len(held[0]) == tiles.WIDTH * merkle.HASH_SIZE

    def _drop_subtree(self, key: tuple[int, int]) -> None:
        old = self._subtrees.pop(key, None)
        if old is not None:
            self._subtree_bytes -= sum(map(len, old))

    def _keep_subtree(self, tile: Tile, subtree: Subtree) -> None:
        key = (tile.level or 0, tile.index)
        old = self._subtrees.get(key)
        if old is not None:
            if len(old[0]) >= len(subtree[0]):
                return
            self._subtree_bytes -= sum(map(len, old))
        self._subtrees[key] = subtree
        self._subtrees.move_to_end(key)
        self._subtree_bytes += sum(map(len, subtree))
        while self._subtree_bytes > self.cache_bytes:
            _, gone = self._subtrees.popitem(last=False)
            self._subtree_bytes -= sum(map(len, gone))

    def _keep(self, key: tuple[Tile, bool], data: bytes) -> None:
        if len(data) > self.cache_bytes:
            return
        self._cache[key] = data
        self._cached += len(data)
        while self._cached > self.cache_bytes:
            _, old = self._cache.popitem(last=False)
            self._cached -= len(old)
