"""C2SP tlog-tiles math: the spec's examples, Go sumdb's and tessera's test vectors, and proofs from tiles
equal to proofs from the whole tree."""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustscore.errors import InvalidInput, ProofError
from trustscore.ledger import merkle, tiles
from trustscore.ledger.tiles import Tile

# --- paths: the spec's example and tessera api/layout/paths_test.go ---------------------------------


def test_spec_index_example() -> None:
    # tlog-tiles: "index 1234067 will be encoded as x001/x234/067"
    assert tiles.encode_index(1234067) == "x001/x234/067"
    # Go sumdb/tlog tile.go: "123456789 encodes as x123/x456/789"
    assert tiles.encode_index(123456789) == "x123/x456/789"


@pytest.mark.parametrize(
    ("tile", "path"),
    [
        (Tile(0, 0), "tile/0/000"),
        (Tile(0, 0, 255), "tile/0/000.p/255"),
        (Tile(1, 0), "tile/1/000"),
        (Tile(15, 455667), "tile/15/x455/667"),
        (Tile(15, 123456789, 41), "tile/15/x123/x456/789.p/41"),
        (Tile(None, 0), "tile/entries/000"),
        (Tile(None, 0, 8), "tile/entries/000.p/8"),
        (Tile(None, 255), "tile/entries/255"),
        (Tile(None, 255, 253), "tile/entries/255.p/253"),
        (Tile(1, 1234067, 8), "tile/1/x001/x234/067.p/8"),
    ],
)
def test_tessera_tile_paths(tile: Tile, path: str) -> None:
    assert tile.path() == path
    assert tiles.parse_path(path) == tile


@pytest.mark.parametrize(
    ("seq", "size", "path"),
    [
        (0, 256, "tile/entries/000"),
        (255, 256, "tile/entries/000"),
        (251, 255, "tile/entries/000.p/255"),
        (256, 512, "tile/entries/001"),
        (3, 257, "tile/entries/000"),
        (256, 257, "tile/entries/001.p/1"),
        (123456789 * 256, 123456790 * 256, "tile/entries/x123/x456/789"),
    ],
)
def test_tessera_entries_path_for_log_index(seq: int, size: int, path: str) -> None:
    assert tiles.tile_at(None, seq // tiles.WIDTH, size).path() == path


@pytest.mark.parametrize(
    ("path", "tile"),
    [
        ("tile/0/x001/x234/067", Tile(0, 1234067)),
        ("tile/0/x001/x234/067.p/89", Tile(0, 1234067, 89)),
        ("tile/63/x999/x999/x999/x999/x999/999.p/255", Tile(63, 999999999999999999, 255)),
        ("tile/0/001", Tile(0, 1)),
    ],
)
def test_tessera_parse_ok(path: str, tile: Tile) -> None:
    assert tiles.parse_path(path) == tile


@pytest.mark.parametrize(
    "path",
    [
        # tessera TestParseTileLevelIndexPartial's errors
        "tile/0/x001/x234/067.p/",
        "tile/0/x001/x234/067.p",
        "tile/0/x001/x234/",
        "tile/0/x001/x234",
        "tile/0/x001/",
        "tile/0/x001",
        "tile/1/x001/.p/abc",
        "tile/64/x001/002",
        "tile/-1/x001/002",
        "tile/abc/x001/002",
        "tile/8/001/002",
        "tile/8/x001/0002",
        "tile/8/x001/-002",
        "tile/8/x001/002.p/256",
        # Go sumdb FuzzParseTilePath seeds that are not C2SP paths (the height is not in the path)
        "tile/3/5/123/456/078",
        "tile/3/-1/123/456/078",
        "tile/1/data/x003/x057/500",
        # and the rest of what is not the one canonical form
        "tile/00/000",
        "tile/0/x000/001",
        "tile/0/000.p/0",
        "tile/0/000.p/08",
        "tile/0/000.p/256",
        "tile/entries/000.p/-1",
        "tiles/0/000",
        "tile/0",
        "tile/0/+01",
        "tile/0/٠٠١",
        "",
    ],
)
def test_malformed_paths_are_refused(path: str) -> None:
    with pytest.raises(InvalidInput):
        tiles.parse_path(path)


@given(st.one_of(st.none(), st.integers(0, 63)), st.integers(0, 10**18), st.integers(1, 256))
def test_path_round_trip(level: int | None, index: int, width: int) -> None:
    tile = Tile(level, index, width)
    assert tiles.parse_path(tile.path()) == tile


# --- which tiles a tree has ----------------------------------------------------------------------------


def test_spec_size_70000() -> None:
    # "a tree of size 70,000 will be represented by 273 full level 0 tiles, one partial level 0 tile of
    # width 112, one full level 1 tile, one partial level 1 tile of width 17, and one partial level 2
    # tile of width 1."
    every = tiles.all_tiles(70_000)
    level0 = [t for t in every if t.level == 0]
    assert len([t for t in level0 if t.full]) == 273
    assert [t.width for t in level0 if not t.full] == [112]
    assert [t for t in every if t.level == 1] == [Tile(1, 0), Tile(1, 1, 17)]
    assert [t for t in every if t.level == 2] == [Tile(2, 0, 1)]
    assert len(every) == 273 + 1 + 2 + 1


def test_spec_size_256() -> None:
    # "a tree of size 256 will be represented by a full level 0 tile and a partial level 1 tile of width 1"
    assert tiles.all_tiles(256) == [Tile(0, 0), Tile(1, 0, 1)]
    assert tiles.all_tiles(0) == []


@pytest.mark.parametrize(
    ("old", "new", "count"),
    [(1, 1, 0), (100, 101, 1), (1023, 1025, 3), (1024, 1030, 1), (1030, 2000, 1), (1030, 10000, 10),
     (49516517, 49516586, 3)],
)  # fmt: skip
def test_go_new_tiles_for_size(old: int, new: int, count: int) -> None:
    # golang.org/x/mod/sumdb/tlog TestNewTilesForSize (height 10)
    assert len(tiles.new_tile_coords(old, new, 10)) == count


def test_new_tiles_of_a_growing_tree_are_its_tiles() -> None:
    published: dict[tuple[int | None, int], Tile] = {}
    for size in range(1, 70_000, 997):
        for t in tiles.new_tiles(max(0, size - 997), size):
            published[(t.level, t.index)] = t
        assert sorted(published.values()) == sorted(tiles.all_tiles(size))


# --- bytes ---------------------------------------------------------------------------------------------


def test_bundle_round_trip_and_bounds() -> None:
    entries = [b"", b"a", b"x" * 65535]
    data = tiles.encode_bundle(entries)
    assert data[:2] == b"\x00\x00" and data[2:4] == b"\x00\x01" and data[5:7] == b"\xff\xff"
    assert tiles.decode_bundle(Tile(None, 0, 3), data) == entries
    with pytest.raises(InvalidInput, match="65535"):
        tiles.encode_bundle([b"x" * 65536])
    for bad in (data[:-1], data + b"\x00", data + b"\x00\x00"):
        with pytest.raises(ProofError):
            tiles.decode_bundle(Tile(None, 0, 3), bad)


def test_hash_tile_bytes() -> None:
    hashes = [bytes([i]) * 32 for i in range(3)]
    assert tiles.decode_hashes(Tile(0, 0, 3), tiles.encode_hashes(hashes)) == hashes
    with pytest.raises(ProofError):
        tiles.decode_hashes(Tile(0, 0, 4), tiles.encode_hashes(hashes))


# --- proofs from tiles ---------------------------------------------------------------------------------


def leaf_hashes(n: int) -> list[bytes]:
    return [merkle.leaf_hash(b"leaf %d" % i) for i in range(n)]


class Tiled:
    """The tiles of a tree held in memory, counting what is fetched."""

    def __init__(self, hashes: list[bytes]) -> None:
        self.nodes = merkle.complete_nodes(hashes)
        self.fetched: list[Tile] = []

    def data(self, tile: Tile) -> bytes:
        return tiles.encode_hashes([self.nodes[n] for n in tiles.tile_nodes(tile)])

    def fetch(self, wanted: Iterable[Tile]) -> Mapping[Tile, bytes]:
        wanted = list(wanted)
        self.fetched += wanted
        return {t: self.data(t) for t in wanted}


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_proofs_from_tiles_equal_proofs_from_the_tree(data: st.DataObject) -> None:
    size = data.draw(st.integers(1, 70_000))
    hashes = leaf_hashes(size)
    tree = Tiled(hashes)
    index = data.draw(st.integers(0, size - 1))
    old = data.draw(st.integers(1, size))
    assert tiles.root_from_tiles(size, tree.fetch) == merkle.root_from_leaf_hashes(hashes)
    assert tiles.inclusion_proof(index, size, tree.fetch) == merkle.inclusion_proof(index, size, hashes)
    assert tiles.consistency_proof(old, size, tree.fetch) == merkle.consistency_proof(old, size, hashes)


def test_a_proof_fetches_only_few_tiles() -> None:
    size = 70_000
    tree = Tiled(leaf_hashes(size))
    tiles.inclusion_proof(12345, size, tree.fetch)
    # level 0 tile of the leaf, the partial level 0, level 1 full and partial, level 2: at most 5
    assert len(tree.fetched) <= 5
    assert all(t.width == tiles.width_at(t.level or 0, t.index, size) for t in tree.fetched)


def test_tree_check_rebuilds_and_catches_a_tampered_tile() -> None:
    size = 256 * 256 + 300
    hashes = leaf_hashes(size)
    tree = Tiled(hashes)
    root = merkle.root_from_leaf_hashes(hashes)

    def run(tamper: Tile | None) -> bytes:
        def upper(tile: Tile) -> list[bytes]:
            out = tiles.decode_hashes(tile, tree.data(tile))
            if tile == tamper:
                out[-1] = hashlib.sha256(out[-1]).digest()
            return out

        check = tiles.TreeCheck(size, upper)
        for t in tiles.tiles_for_size(size, 0):
            got = tiles.decode_hashes(t, tree.data(t))
            if t == tamper:
                got[7] = bytes(32)
            check.feed(got)
        return check.finish(root)

    assert run(None) == root
    for bad in (Tile(0, 3), Tile(0, 257, 44), Tile(1, 0), Tile(1, 1, 1), Tile(2, 0, 1)):
        with pytest.raises(ProofError):
            run(bad)


def test_node_tile_refuses_incomplete_nodes() -> None:
    with pytest.raises(InvalidInput):
        tiles.node_tile((8, 0), 255)
    assert tiles.node_tile((8, 0), 256) == Tile(1, 0, 1)
    assert tiles.node_tile((3, 1), 20) == Tile(0, 0, 20)


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_a_folded_tile_holds_every_node_of_the_tree_under_it(data: st.DataObject) -> None:
    """Any complete node of the tree is a slice of the folded subtree of its tile, from a tile of any
    width that holds it whole (a wider one, folded later, answers for the narrower); else None."""
    size = data.draw(st.integers(1, 70_000))
    tree = Tiled(leaf_hashes(size))
    nodes = tree.nodes
    node = data.draw(st.sampled_from(sorted(nodes)))
    tile = tiles.node_tile(node, size)
    subtree = tiles.tile_subtree(tree.data(tile))
    assert tiles.node_in_subtree(node, tile.index, subtree) == nodes[node]
    level, index = node
    narrower = Tile(tile.level, tile.index, data.draw(st.integers(1, tile.width)))
    holds = ((index + 1) << (level % tiles.HEIGHT)) <= tiles.WIDTH * tile.index + narrower.width
    got = tiles.node_in_subtree(node, tile.index, tiles.tile_subtree(tree.data(narrower)))
    assert got == (nodes[node] if holds else None)


def test_tile_subtree_refuses_bytes_that_are_not_hashes() -> None:
    for bad in (b"", b"x" * 33, b"x" * (32 * 257)):
        with pytest.raises(ProofError):
            tiles.tile_subtree(bad)


# --- full tiles stored pre-folded (migration 0018) ------------------------------------------------------


@given(st.integers(0, 2**22), st.integers(0, 2**22))
def test_full_tiles_between_are_the_full_tiles_the_growth_adds(a: int, b: int) -> None:
    old, new = min(a, b), max(a, b)

    def full(size: int) -> set[tuple[int, int]]:  # from the widths alone, level by level
        out = set()
        level = 0
        while size >> (tiles.HEIGHT * (level + 1)):
            out |= {(level, n) for n in range(size >> (tiles.HEIGHT * (level + 1)))}
            level += 1
        return out

    got = tiles.full_tiles_between(old, new)
    assert len(got) == len(set(got))
    assert set(got) == full(new) - full(old)
    assert all(tiles.width_at(lv, n, new) == tiles.WIDTH > tiles.width_at(lv, n, old) for lv, n in got)


def test_full_tiles_between_small_sizes() -> None:
    assert tiles.full_tiles_between(0, 255) == []
    assert tiles.full_tiles_between(255, 256) == [(0, 0)]
    assert tiles.full_tiles_between(256, 512) == [(0, 1)]
    assert tiles.full_tiles_between(65535, 65536) == [(0, 255), (1, 0)]
    assert tiles.full_tiles_between(1000, 1000) == []


@given(st.binary(min_size=tiles.WIDTH * 32, max_size=tiles.WIDTH * 32))
@settings(max_examples=20)
def test_a_full_subtree_encodes_and_decodes_to_itself(data: bytes) -> None:
    subtree = tiles.tile_subtree(data)
    encoded = tiles.encode_subtree(subtree)
    assert len(encoded) == tiles.FULL_SUBTREE_BYTES == 510 * 32
    assert tiles.decode_subtree(encoded) == subtree
    for node in tiles.tile_nodes(Tile(0, 3)):  # any node of the tile, from the decoded subtree
        assert (
            tiles.node_in_subtree(node, 3, tiles.decode_subtree(encoded))
            == data[32 * (node[1] - 3 * 256) : 32 * (node[1] - 3 * 256) + 32]
        )


def test_only_a_full_subtree_is_stored() -> None:
    with pytest.raises(ProofError, match="full tile"):
        tiles.encode_subtree(tiles.tile_subtree(b"\x01" * 32 * 255))
    with pytest.raises(ProofError, match="16320 bytes"):
        tiles.decode_subtree(b"\x01" * 32 * 509)
