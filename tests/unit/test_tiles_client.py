"""The tiles client on a directory mirror written from an in-memory tree: proofs for older tree sizes cut
from the tiles the mirror has, a whole-tree check, and a tampered or truncated tile refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from trustscore.errors import NotFound, ProofError
from trustscore.ledger import checkpoint, keys, merkle, tiles
from trustscore.ledger.tiles import Tile
from trustscore.tiles_client import TileClient

SIZE = 256 * 3 + 77


def write_mirror(root: Path, leaves: list[bytes], key: keys.SigningKey) -> checkpoint.Checkpoint:
    """A mirror holding the tiles and bundles of the tree of ``len(leaves)`` only (as ``log mirror`` does)."""
    hashes = [merkle.leaf_hash(leaf) for leaf in leaves]
    nodes = merkle.complete_nodes(hashes)
    for t in tiles.all_tiles(len(leaves)):
        (root / t.path()).parent.mkdir(parents=True, exist_ok=True)
        (root / t.path()).write_bytes(tiles.encode_hashes([nodes[n] for n in tiles.tile_nodes(t)]))
    for t in tiles.tiles_for_size(len(leaves), None):
        (root / t.path()).parent.mkdir(parents=True, exist_ok=True)
        first = tiles.WIDTH * t.index
        (root / t.path()).write_bytes(tiles.encode_bundle(leaves[first : first + t.width]))
    cp = checkpoint.Checkpoint("example.com/log", len(leaves), merkle.root_from_leaf_hashes(hashes))
    (root / "checkpoint").write_text(checkpoint.sign_checkpoint(cp, key))
    return cp


@pytest.fixture
def mirror(tmp_path: Path) -> tuple[Path, list[bytes], checkpoint.Checkpoint]:
    leaves = [b"entry %d" % i for i in range(SIZE)]
    cp = write_mirror(tmp_path, leaves, keys.SigningKey.generate())
    return tmp_path, leaves, cp


def test_proofs_for_older_sizes_from_the_tiles_a_mirror_has(
    mirror: tuple[Path, list[bytes], checkpoint.Checkpoint],
) -> None:
    root, leaves, cp = mirror
    hashes = [merkle.leaf_hash(leaf) for leaf in leaves]
    with TileClient(str(root)) as client:
        client.checkpoint()
        assert client.size == SIZE
        for size in (1, 100, 256, 300, 513, SIZE):  # partial widths the mirror never held: cut
            for index in {0, size // 2, size - 1}:
                assert client.inclusion_proof(index, size) == merkle.inclusion_proof(index, size, hashes)
            assert client.consistency_proof(1, size) == merkle.consistency_proof(1, size, hashes)
        assert client.entries(250, 260) == [(i, leaves[i]) for i in range(250, 260)]
        report = client.verify(cp)
        assert (report.size, report.entries) == (SIZE, SIZE)


def test_a_tampered_or_short_tile_is_refused(mirror: tuple[Path, list[bytes], checkpoint.Checkpoint]) -> None:
    root, _, cp = mirror
    level1 = root / Tile(1, 0, 3).path()
    good = level1.read_bytes()
    level1.write_bytes(good[:-1] + bytes([good[-1] ^ 1]))
    with TileClient(str(root)) as client, pytest.raises(ProofError, match=r"tile/1/000\.p/3"):
        client.verify(cp)
    level1.write_bytes(good[:-32])
    with TileClient(str(root)) as client, pytest.raises(ProofError, match="bytes"):
        client.verify(cp)
    level1.write_bytes(good)
    (root / "tile/entries/001").write_bytes(b"\x00\x01x" * 256)
    with TileClient(str(root)) as client, pytest.raises(ProofError, match="entry 256 does not hash"):
        client.verify(cp)
    (root / "tile/0/003.p/77").unlink()
    with TileClient(str(root)) as client, pytest.raises(NotFound):
        client.verify(cp, entries=False)
