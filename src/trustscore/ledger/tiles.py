"""C2SP tlog-tiles (https://c2sp.org/tlog-tiles): tile coordinates, paths, entry bundles, and proofs
computed from tiles. Pure: the tiles come in through a ``fetch`` function (HOUSE_STYLE 10).

A tile at level ``L`` (0..63), index ``N`` holds up to 256 consecutive hashes of the stored nodes at tree
level ``8 * L``: hash ``i`` is node ``(8L, 256N + i)`` of :mod:`trustscore.ledger.merkle`. Level-0 tiles
hold leaf hashes; an entry bundle ``N`` holds the leaves whose hashes are level-0 tile ``N``, each
prefixed by its big-endian uint16 length. For a tree of ``size`` leaves, tile ``(L, N)`` has width
``min(256, (size >> 8L) - 256N)``; a width below 256 is a partial tile, written ``.p/<W>``. Any node of
the tree is the hash of a power-of-two run of one tile's hashes, so a proof needs one tile per node
level band. See ``docs/tiles.md``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from trustscore.errors import InvalidInput, ProofError
from trustscore.ledger import merkle

HEIGHT = 8
WIDTH = 1 << HEIGHT  # hashes in a full tile
MAX_LEVEL = 63
MAX_ENTRY = 0xFFFF  # an entry bundle's uint16 length prefix
_PATH_BASE = 1000
_GROUP = re.compile(r"x?[0-9]{3}")
_DECIMAL = re.compile(r"0|[1-9][0-9]*")


@dataclass(frozen=True, order=True)
class Tile:
    """Tile ``index`` at ``level`` (``level`` None: the entry bundle), ``width`` hashes (256 = full)."""

    level: int | None
    index: int
    width: int = WIDTH

    def __post_init__(self) -> None:
        if self.level is not None and not 0 <= self.level <= MAX_LEVEL:
            raise InvalidInput(f"tile level {self.level} is not 0..{MAX_LEVEL}")
        if self.index < 0:
            raise InvalidInput(f"tile index {self.index} is negative")
        if not 1 <= self.width <= WIDTH:
            raise InvalidInput(f"tile width {self.width} is not 1..{WIDTH}")

    @property
    def full(self) -> bool:
        return self.width == WIDTH

    @property
    def is_entries(self) -> bool:
        return self.level is None

    def path(self) -> str:
        """The resource path: ``tile/<L>/<N>[.p/<W>]`` or ``tile/entries/<N>[.p/<W>]``."""
        level = "entries" if self.level is None else str(self.level)
        suffix = "" if self.full else f".p/{self.width}"
        return f"tile/{level}/{encode_index(self.index)}{suffix}"

    def hash_level(self) -> int:
        """The tree level of this tile's hashes (entry bundles stand for level-0 tiles)."""
        return HEIGHT * (self.level or 0)


def encode_index(n: int) -> str:
    """``N`` as zero-padded 3-digit path elements, all but the last prefixed ``x`` (1234067: x001/x234/067)."""
    if n < 0:
        raise InvalidInput(f"tile index {n} is negative")
    text = f"{n % _PATH_BASE:03d}"
    n //= _PATH_BASE
    while n:
        text = f"x{n % _PATH_BASE:03d}/{text}"
        n //= _PATH_BASE
    return text


def parse_path(path: str) -> Tile:
    """Parse ``tile/<L>/<N>[.p/<W>]`` or ``tile/entries/<N>[.p/<W>]`` strictly (the one encoding only).

    Raises :class:`InvalidInput` for anything that is not exactly the spec's form.
    """
    if len(path) > 200:
        raise InvalidInput("tile path is too long")
    parts = path.split("/")
    if len(parts) < 3 or parts[0] != "tile":
        raise InvalidInput(f"malformed tile path {path!r}: tile/<L>/<N>[.p/<W>]")
    level: int | None = None
    if parts[1] != "entries":
        if not _DECIMAL.fullmatch(parts[1]) or int(parts[1]) > MAX_LEVEL:
            raise InvalidInput(f"malformed tile path {path!r}: the level is 0..{MAX_LEVEL}, no leading zeros")
        level = int(parts[1])
    groups = parts[2:]
    width = WIDTH
    if len(groups) >= 2 and groups[-2].endswith(".p"):
        w = groups[-1]
        if not _DECIMAL.fullmatch(w) or not 1 <= int(w) < WIDTH:
            raise InvalidInput(f"malformed tile path {path!r}: a partial width is 1..{WIDTH - 1}")
        width = int(w)
        groups = [*groups[:-2], groups[-2][: -len(".p")]]
    index = 0
    for i, group in enumerate(groups):
        last = i == len(groups) - 1
        if not _GROUP.fullmatch(group) or group.startswith("x") == last:
            raise InvalidInput(f"malformed tile path {path!r}: the index is x-prefixed 3-digit groups")
        index = index * _PATH_BASE + int(group.lstrip("x"))
    tile = Tile(level, index, width)
    if tile.path() != path:  # e.g. a leading x000 group: one index, one path
        raise InvalidInput(f"malformed tile path {path!r}: not canonical ({tile.path()})")
    return tile


# --- which tiles a tree has --------------------------------------------------------------------------


def width_at(level: int, index: int, size: int) -> int:
    """The width of tile ``(level, index)`` in a tree of ``size`` leaves; 0 if it has none yet."""
    hashes = size >> (HEIGHT * level)
    return max(0, min(WIDTH, hashes - WIDTH * index))


def tile_at(level: int | None, index: int, size: int) -> Tile:
    """Tile ``(level, index)`` as a tree of ``size`` has it; :class:`InvalidInput` if it has none."""
    width = width_at(level or 0, index, size)
    if width == 0:
        raise InvalidInput(f"a tree of size {size} has no tile {level}/{index}")
    return Tile(level, index, width)


def tiles_for_size(size: int, level: int | None = 0) -> list[Tile]:
    """Every tile of ``level`` (None: entry bundles) in a tree of ``size``, full ones then the partial."""
    hashes = size >> (HEIGHT * (level or 0))
    return [Tile(level, n, min(WIDTH, hashes - WIDTH * n)) for n in range(-(-hashes // WIDTH))]


def all_tiles(size: int) -> list[Tile]:
    """Every hash tile of a tree of ``size``, level by level (what a full mirror holds besides bundles)."""
    out: list[Tile] = []
    level = 0
    while size >> (HEIGHT * level):
        out += tiles_for_size(size, level)
        level += 1
    return out


def new_tiles(old_size: int, new_size: int) -> list[Tile]:
    """Tiles to publish when a tree grows from ``old_size`` to ``new_size`` (Go sumdb ``NewTiles``)."""
    return [Tile(*coords) for coords in new_tile_coords(old_size, new_size, HEIGHT)]


def new_tile_coords(old_size: int, new_size: int, height: int) -> list[tuple[int, int, int]]:
    """:func:`new_tiles` as ``(level, index, width)`` for tiles of any ``height`` (Go's tests use 10)."""
    out: list[tuple[int, int, int]] = []
    level = 0
    while new_size >> (height * level):
        old_n, new_n = old_size >> (height * level), new_size >> (height * level)
        if old_n != new_n:
            out += [(level, n, 1 << height) for n in range(old_n >> height, new_n >> height)]
            n = new_n >> height
            if w := new_n - (n << height):
                out.append((level, n, w))
        level += 1
    return out


def tile_nodes(tile: Tile) -> list[merkle.NodeId]:
    """The stored nodes a hash tile (or, for a bundle, its level-0 tile) lists, in order."""
    start = WIDTH * tile.index
    return [(tile.hash_level(), start + i) for i in range(tile.width)]


# --- tile bytes --------------------------------------------------------------------------------------


def encode_hashes(hashes: Sequence[bytes]) -> bytes:
    """A hash tile's bytes: its 32-byte hashes concatenated."""
    if not 1 <= len(hashes) <= WIDTH or any(len(h) != merkle.HASH_SIZE for h in hashes):
        raise InvalidInput(f"a tile holds 1..{WIDTH} hashes of {merkle.HASH_SIZE} bytes")
    return b"".join(hashes)


def decode_hashes(tile: Tile, data: bytes) -> list[bytes]:
    """The hashes of ``tile`` from its bytes; :class:`ProofError` unless exactly ``width`` hashes."""
    if len(data) != tile.width * merkle.HASH_SIZE:
        raise ProofError(f"{tile.path()} is {len(data)} bytes, not {tile.width * merkle.HASH_SIZE}")
    size = merkle.HASH_SIZE
    return [data[i : i + size] for i in range(0, len(data), size)]


def encode_bundle(entries: Sequence[bytes]) -> bytes:
    """An entry bundle: each entry prefixed by its big-endian uint16 length.

    An entry longer than 65,535 bytes cannot be carried (the spec's limit): :class:`InvalidInput`.
    """
    out = bytearray()
    for i, entry in enumerate(entries):
        if len(entry) > MAX_ENTRY:
            raise InvalidInput(
                f"entry {i} of the bundle is {len(entry)} bytes; a tlog-tiles entry bundle carries at most "
                f"{MAX_ENTRY}"
            )
        out += len(entry).to_bytes(2, "big") + entry
    return bytes(out)


def decode_bundle(tile: Tile, data: bytes) -> list[bytes]:
    """The entries of bundle ``tile``; :class:`ProofError` unless exactly ``width`` entries fill it."""
    out: list[bytes] = []
    at = 0
    while at < len(data):
        if at + 2 > len(data):
            raise ProofError(f"{tile.path()} ends inside a length prefix")
        n = int.from_bytes(data[at : at + 2], "big")
        if at + 2 + n > len(data):
            raise ProofError(f"{tile.path()} ends inside entry {len(out)}")
        out.append(data[at + 2 : at + 2 + n])
        at += 2 + n
    if len(out) != tile.width:
        raise ProofError(f"{tile.path()} holds {len(out)} entries, not {tile.width}")
    return out


# --- nodes and proofs from tiles ---------------------------------------------------------------------


def node_tile(node: merkle.NodeId, size: int) -> Tile:
    """The tile of a tree of ``size`` whose hashes make up stored node ``node`` (complete in the tree)."""
    level, index = node
    if (index + 1) << level > size:
        raise InvalidInput(f"node {node} is not complete in a tree of size {size}")
    band = level // HEIGHT
    return tile_at(band, (index << (level - HEIGHT * band)) >> HEIGHT, size)


def node_from_tile(node: merkle.NodeId, tile: Tile, hashes: Sequence[bytes]) -> bytes:
    """The hash of ``node`` folded from the run of ``tile``'s hashes under it (a perfect subtree)."""
    level, index = node
    rest = level - tile.hash_level()
    first = (index << rest) - WIDTH * tile.index
    if rest < 0 or first < 0 or first + (1 << rest) > len(hashes):
        raise InvalidInput(f"node {node} is not in {tile.path()}")
    row = list(hashes[first : first + (1 << rest)])
    while len(row) > 1:
        row = [merkle.node_hash(row[i], row[i + 1]) for i in range(0, len(row), 2)]
    return row[0]


Subtree = tuple[bytes, ...]
"""A hash tile's complete nodes by height above its hashes, each height's hashes concatenated:
``subtree[k][32j : 32j + 32]`` is the node folded from the tile's hashes ``[j << k, (j + 1) << k)``."""


def tile_subtree(data: bytes) -> Subtree:
    """Every complete node of a hash tile's bytes, heights 0..7, folded once so that any node in the tile
    is then a slice (:func:`node_in_subtree`); about twice the tile's bytes."""
    size = merkle.HASH_SIZE
    if len(data) % size or not size <= len(data) <= WIDTH * size:
        raise ProofError(f"a hash tile is 1..{WIDTH} hashes of {size} bytes, not {len(data)} bytes")
    out = [data]
    for _ in range(1, HEIGHT):
        row = out[-1]
        pairs = len(row) // (2 * size)
        out.append(
            b"".join(
                hashlib.sha256(b"\x01" + row[2 * size * j : 2 * size * (j + 1)]).digest()
                for j in range(pairs)
            )
        )
    return tuple(out)


def node_in_subtree(node: merkle.NodeId, tile_index: int, subtree: Subtree) -> bytes | None:
    """The hash of stored ``node`` from the subtree of hash tile ``tile_index`` of the node's level band;
    None if that tile, of the width it was folded at, does not hold the node complete."""
    level, index = node
    rest = level % HEIGHT
    at = (index - (tile_index << (HEIGHT - rest))) * merkle.HASH_SIZE
    row = subtree[rest]
    return row[at : at + merkle.HASH_SIZE] if 0 <= at < len(row) else None


FULL_SUBTREE_BYTES = (2 * WIDTH - 2) * merkle.HASH_SIZE  # a full tile's subtree: 510 hashes, 16,320 bytes


def encode_subtree(subtree: Subtree) -> bytes:
    """A FULL tile's subtree as one byte string (heights 0..7 concatenated), as the store keeps it."""
    data = b"".join(subtree)
    if len(subtree) != HEIGHT or len(data) != FULL_SUBTREE_BYTES:
        raise ProofError(f"not the subtree of a full tile: {len(subtree)} heights, {len(data)} bytes")
    return data


def decode_subtree(data: bytes) -> Subtree:
    """The inverse of :func:`encode_subtree`: the stored subtree of a full tile, split by height."""
    if len(data) != FULL_SUBTREE_BYTES:
        raise ProofError(f"a full tile's subtree is {FULL_SUBTREE_BYTES} bytes, not {len(data)}")
    out = []
    at = 0
    for height in range(HEIGHT):
        end = at + (WIDTH >> height) * merkle.HASH_SIZE
        out.append(data[at:end])
        at = end
    return tuple(out)


def full_tiles_between(old_size: int, new_size: int) -> list[tuple[int, int]]:
    """``(level, index)`` of every hash tile that is full in a tree of ``new_size`` but not of ``old_size``
    (each is completed by the growth: its last node at level ``8 * level`` is new)."""
    out: list[tuple[int, int]] = []
    level = 0
    while new_size >> (HEIGHT * (level + 1)):
        shift = HEIGHT * (level + 1)
        out += [(level, n) for n in range(old_size >> shift, new_size >> shift)]
        level += 1
    return out


Fetch = Callable[[Iterable[Tile]], Mapping[Tile, bytes]]
"""Fetch the bytes of each tile (a caller's I/O: HTTP, a directory, a store)."""


def nodes_from_tiles(nodes: Iterable[merkle.NodeId], size: int, fetch: Fetch) -> dict[merkle.NodeId, bytes]:
    """The hashes of stored ``nodes`` of a tree of ``size``, fetching each needed tile once."""
    wanted = {node: node_tile(node, size) for node in set(nodes)}
    data = fetch(sorted(set(wanted.values())))
    decoded = {tile: decode_hashes(tile, data[tile]) for tile in set(wanted.values())}
    return {node: node_from_tile(node, tile, decoded[tile]) for node, tile in wanted.items()}


def proof_from_tiles(ranges: Sequence[merkle.LeafRange], size: int, fetch: Fetch) -> list[bytes]:
    """The hashes of proof ``ranges`` (:func:`merkle.inclusion_proof_ranges` and the like) from tiles."""
    return merkle.assemble(ranges, nodes_from_tiles(merkle.required_nodes(ranges), size, fetch))


def root_from_tiles(size: int, fetch: Fetch) -> bytes:
    """The root of the tree of ``size`` from its tiles (at most two tiles per level: O(log size))."""
    ranges = merkle.root_ranges(size)
    return proof_from_tiles(ranges, size, fetch)[0] if ranges else merkle.EMPTY_ROOT


def inclusion_proof(index: int, size: int, fetch: Fetch) -> list[bytes]:
    """The RFC 9162 inclusion proof of leaf ``index`` in the tree of ``size``, from tiles."""
    return proof_from_tiles(merkle.inclusion_proof_ranges(index, size), size, fetch)


def consistency_proof(size1: int, size2: int, fetch: Fetch) -> list[bytes]:
    """The RFC 9162 consistency proof from ``size1`` to ``size2``, from the tiles of ``size2``."""
    return proof_from_tiles(merkle.consistency_proof_ranges(size1, size2), size2, fetch)


class TreeCheck:
    """Rebuild a tree from its level-0 tiles, fed in order, checking every higher tile on the way.

    Memory is the frontier plus one pending tile per level. :meth:`feed` takes the next level-0 tile's
    hashes; each completed node at a tile level (8, 16, ...) must equal the hash the level's tile lists
    (``upper`` fetches it); :meth:`finish` checks the root. Raises :class:`ProofError` naming the tile.
    """

    def __init__(self, size: int, upper: Callable[[Tile], Sequence[bytes]]) -> None:
        self.size = size
        self.fed = 0
        self._upper = upper
        self._frontier: list[bytes] = []
        self._pending: dict[int, tuple[Tile, Sequence[bytes]]] = {}

    def feed(self, leaf_hashes: Sequence[bytes]) -> None:
        if self.fed + len(leaf_hashes) > self.size:
            raise ProofError(f"more than {self.size} leaf hashes fed")
        done, self._frontier = merkle.extend(self.fed, self._frontier, leaf_hashes)
        self.fed += len(leaf_hashes)
        for level, index, h in done:
            if level and level % HEIGHT == 0:
                self._check(level // HEIGHT, index, h)

    def _check(self, band: int, index: int, h: bytes) -> None:
        n = index >> HEIGHT
        tile, hashes = self._pending.get(band, (None, ()))
        if tile is None or tile.index != n:
            tile = tile_at(band, n, self.size)
            hashes = self._upper(tile)
            self._pending[band] = (tile, hashes)
        if hashes[index - WIDTH * n] != h:
            raise ProofError(
                f"the tiles below {tile.path()} do not hash to its hash {index - WIDTH * n}: one of them is wrong"
            )

    def finish(self, root: bytes) -> bytes:
        """Return ``root`` if the fed tree has it; else raise :class:`ProofError`."""
        if self.fed != self.size:
            raise ProofError(f"{self.fed} leaf hashes fed for a tree of size {self.size}")
        got = merkle.EMPTY_ROOT
        if self._frontier:
            got = self._frontier[-1]
            for left in reversed(self._frontier[:-1]):
                got = merkle.node_hash(left, got)
        if got != root:
            raise ProofError(f"the tiles of a tree of size {self.size} do not hash to the checkpoint's root")
        return root
