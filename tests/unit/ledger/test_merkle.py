"""Merkle math: language-neutral vectors, known answers, and properties of generated proofs."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from trustscore.errors import InconsistencyError, InvalidInput, ProofError
from trustscore.ledger import merkle

#: transparency-dev/merkle's testdata (Apache-2.0), vendored beside this test: see vectors/merkle/README.md.
VECTORS = Path(__file__).resolve().parent / "vectors" / "merkle"


def _cases(kind: str) -> list[Path]:
    folder = VECTORS / kind
    # A missing folder must FAIL (the sentinel path does not exist), never silently skip.
    return sorted(folder.rglob("*.json")) if folder.is_dir() else [folder / "MISSING-VECTORS.json"]


def _case_id(path: Path) -> str:
    return f"{path.parent.name}/{path.stem}"


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def _b64(text: str) -> bytes:
    return base64.b64decode(text, validate=True)


def _proof(data: dict[str, Any]) -> list[bytes]:
    return [_b64(h) for h in data["proof"] or []]


def test_vector_folders_exist_and_are_complete() -> None:
    assert VECTORS.is_dir(), f"Merkle test vectors missing at {VECTORS}"
    assert len(_cases("inclusion")) >= 80
    assert len(_cases("consistency")) >= 80


@pytest.mark.parametrize("path", _cases("inclusion"), ids=_case_id)
def test_inclusion_vector(path: Path) -> None:
    data = _load(path)
    args = (_b64(data["leafHash"]), data["leafIdx"], data["treeSize"], _proof(data), _b64(data["root"]))
    if data["wantErr"]:
        with pytest.raises(ProofError):
            merkle.verify_inclusion(*args)
    else:
        assert merkle.verify_inclusion(*args) == args[-1]


@pytest.mark.parametrize("path", _cases("consistency"), ids=_case_id)
def test_consistency_vector(path: Path) -> None:
    data = _load(path)
    size1, size2, proof = data["size1"], data["size2"], _proof(data)
    root1, root2 = _b64(data["root1"]), _b64(data["root2"])
    if data["wantErr"]:
        with pytest.raises(ProofError) as err:
            merkle.verify_consistency(size1, size2, proof, root1, root2)
        if isinstance(err.value, InconsistencyError):
            assert err.value.old == (size1, root1)
            assert err.value.new == (size2, root2)
            assert err.value.proof == proof
        else:
            assert err.value.extra["proof"] == proof
    else:
        assert merkle.verify_consistency(size1, size2, proof, root1, root2) == root2


def test_vector_happy_paths_are_reproduced_by_the_generator() -> None:
    """Every happy-path proof in the vectors over the 8-leaf tree is what our generator emits."""
    leaves = [merkle.leaf_hash(d) for d in LEAF_DATA]
    checked = 0
    for path in _cases("inclusion"):
        data = _load(path)
        if data["wantErr"] or data["treeSize"] > 8 or _b64(data["leafHash"]) != leaves[data["leafIdx"]]:
            continue
        assert merkle.inclusion_proof(data["leafIdx"], data["treeSize"], leaves) == _proof(data)
        checked += 1
    for path in _cases("consistency"):
        data = _load(path)
        if data["wantErr"] or data["size1"] == 0 or data["size2"] > 8:
            continue
        if _b64(data["root2"]) != ROOTS[data["size2"] - 1]:
            continue
        assert merkle.consistency_proof(data["size1"], data["size2"], leaves) == _proof(data)
        checked += 1
    assert checked >= 8


# Known answers from RFC 6962 test data (as used by transparency-dev/merkle and certificate-transparency).
LEAF_DATA = [bytes.fromhex(h) for h in ["", "00", "10", "2021", "3031", "40414243", "5051525354555657",
                                        "606162636465666768696a6b6c6d6e6f"]]  # fmt: skip
ROOTS = [
    bytes.fromhex(h)
    for h in [
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
        "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
        "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
        "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
        "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
    ]
]


def _hexes(*items: str) -> list[bytes]:
    return [bytes.fromhex(h) for h in items]


INCLUSION_KAT = [
    (0, 8, _hexes(
        "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4")),
    (5, 8, _hexes(
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7")),
    (2, 3, _hexes("fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125")),
    (1, 5, _hexes(
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b")),
]  # fmt: skip

CONSISTENCY_KAT = [
    (1, 8, _hexes(
        "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4")),
    (6, 8, _hexes(
        "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7")),
    (2, 5, _hexes(
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b")),
    (6, 7, _hexes(
        "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
        "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7")),
]  # fmt: skip


def test_known_roots() -> None:
    leaves = [merkle.leaf_hash(d) for d in LEAF_DATA]
    assert (
        merkle.root_from_leaf_hashes([])
        == merkle.EMPTY_ROOT
        == bytes.fromhex("e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
    )
    nodes = merkle.complete_nodes(leaves)
    for size, root in enumerate(ROOTS, start=1):
        assert merkle.root_from_leaf_hashes(leaves[:size]) == root
        assert merkle.root_from_nodes(size, nodes) == root


@pytest.mark.parametrize(("index", "size", "proof"), INCLUSION_KAT)
def test_known_inclusion_proofs(index: int, size: int, proof: list[bytes]) -> None:
    leaves = [merkle.leaf_hash(d) for d in LEAF_DATA]
    assert merkle.inclusion_proof(index, size, leaves) == proof
    assert merkle.verify_inclusion(leaves[index], index, size, proof, ROOTS[size - 1]) == ROOTS[size - 1]


@pytest.mark.parametrize(("size1", "size2", "proof"), CONSISTENCY_KAT)
def test_known_consistency_proofs(size1: int, size2: int, proof: list[bytes]) -> None:
    leaves = [merkle.leaf_hash(d) for d in LEAF_DATA]
    assert merkle.consistency_proof(size1, size2, leaves) == proof
    root1, root2 = ROOTS[size1 - 1], ROOTS[size2 - 1]
    assert merkle.verify_consistency(size1, size2, proof, root1, root2) == root2
    assert merkle.root_from_consistency_proof(size1, size2, proof, root1) == root2


# --- ranges -------------------------------------------------------------------------------------------


def test_range_nodes_decompose_into_aligned_complete_subtrees() -> None:
    assert merkle.range_nodes(0, 0) == []
    assert merkle.range_nodes(0, 13) == [(3, 0), (2, 2), (0, 12)]
    assert merkle.range_nodes(8, 13) == [(2, 2), (0, 12)]
    assert merkle.range_nodes(3, 9) == [(0, 3), (2, 1), (0, 8)]
    assert merkle.frontier_nodes(6) == [(2, 0), (1, 2)]
    for begin in range(40):
        for end in range(begin, 40):
            covered: list[int] = []
            for level, index in merkle.range_nodes(begin, end):
                covered.extend(range(index << level, (index + 1) << level))
            assert covered == list(range(begin, end))
    with pytest.raises(InvalidInput):
        merkle.range_nodes(5, 4)
    with pytest.raises(InvalidInput):
        merkle.range_nodes(-1, 4)


def test_proof_ranges() -> None:
    assert merkle.inclusion_proof_ranges(0, 1) == []
    assert merkle.inclusion_proof_ranges(5, 8) == [(4, 5), (6, 8), (0, 4)]
    assert merkle.inclusion_proof_ranges(6, 7) == [(4, 6), (0, 4)]
    assert merkle.consistency_proof_ranges(6, 8) == [(4, 6), (6, 8), (0, 4)]
    assert merkle.consistency_proof_ranges(4, 8) == [(4, 8)]
    assert merkle.consistency_proof_ranges(0, 8) == []
    assert merkle.consistency_proof_ranges(8, 8) == []
    assert merkle.root_ranges(0) == []
    assert merkle.root_ranges(9) == [(0, 9)]
    assert merkle.required_nodes(merkle.root_ranges(13)) == {(3, 0), (2, 2), (0, 12)}
    with pytest.raises(InvalidInput):
        merkle.inclusion_proof_ranges(3, 3)
    with pytest.raises(InvalidInput):
        merkle.consistency_proof_ranges(4, 3)


def test_assemble_rejects_missing_nodes_and_non_subtree_ranges() -> None:
    leaves = [merkle.leaf_hash(bytes([i])) for i in range(16)]
    nodes = merkle.complete_nodes(leaves)
    with pytest.raises(InvalidInput, match="not supplied"):
        merkle.assemble([(0, 13)], {k: v for k, v in nodes.items() if k != (0, 12)})
    with pytest.raises(InvalidInput, match="not a subtree"):
        merkle.assemble([(3, 9)], nodes)
    with pytest.raises(InvalidInput, match="empty"):
        merkle.assemble([(3, 3)], nodes)
    assert merkle.assemble([(8, 13)], nodes) == [merkle.root_from_leaf_hashes(leaves[8:13])]


# --- verification edge cases ------------------------------------------------------------------------


def _tree(n: int) -> list[bytes]:
    return [merkle.leaf_hash(i.to_bytes(4, "big")) for i in range(n)]


def test_inclusion_edge_cases() -> None:
    leaves = _tree(10)
    root = merkle.root_from_leaf_hashes(leaves)
    proof = merkle.inclusion_proof(3, 10, leaves)
    with pytest.raises(ProofError, match="beyond tree size"):
        merkle.verify_inclusion(leaves[3], 10, 10, proof, root)
    with pytest.raises(ProofError, match="hashes, not"):
        merkle.verify_inclusion(leaves[3], 3, 10, proof[:-1], root)
    with pytest.raises(ProofError, match="bytes, not 32"):
        merkle.verify_inclusion(leaves[3][:31], 3, 10, proof, root)
    with pytest.raises(ProofError, match="does not lead"):
        merkle.verify_inclusion(leaves[4], 3, 10, proof, root)
    with pytest.raises(ProofError):
        merkle.verify_inclusion(leaves[3], -1, 10, proof, root)
    assert merkle.verify_inclusion(leaves[0], 0, 1, [], leaves[0]) == leaves[0]


def test_consistency_edge_cases() -> None:
    leaves = _tree(10)
    r4, r10 = merkle.root_from_leaf_hashes(leaves[:4]), merkle.root_from_leaf_hashes(leaves)
    assert merkle.verify_consistency(10, 10, [], r10, r10) == r10
    with pytest.raises(InconsistencyError, match="different roots") as err:
        merkle.verify_consistency(10, 10, [], r10, r4)
    assert (err.value.old, err.value.new) == ((10, r10), (10, r4))
    with pytest.raises(ProofError, match="not empty"):
        merkle.verify_consistency(10, 10, [r4], r10, r10)
    with pytest.raises(ProofError, match="empty tree"):
        merkle.verify_consistency(0, 10, [], merkle.EMPTY_ROOT, r10)
    with pytest.raises(InconsistencyError, match="smaller"):
        merkle.verify_consistency(10, 4, [], r10, r4)
    proof = merkle.consistency_proof(4, 10, leaves)
    with pytest.raises(ProofError, match="hashes, not"):
        merkle.verify_consistency(4, 10, [*proof, r4], r4, r10)
    with pytest.raises(InconsistencyError) as bad:
        merkle.verify_consistency(4, 10, proof, r4, r4)
    assert bad.value.proof == proof
    with pytest.raises(InconsistencyError):
        merkle.verify_consistency(4, 10, proof, r10, r10)


def test_extend_rejects_a_wrong_frontier() -> None:
    with pytest.raises(InvalidInput, match="frontier"):
        merkle.extend(3, [merkle.EMPTY_ROOT], [])
    with pytest.raises(InvalidInput, match="leaf hash"):
        merkle.extend(0, [], [b"short"])


def test_root_of_a_hundred_thousand_leaves_matches_stored_nodes() -> None:
    leaves = _tree(100_003)
    stored, frontier = merkle.extend(0, [], leaves)
    nodes = {(level, index): h for level, index, h in stored}
    assert merkle.root_from_nodes(len(leaves), nodes) == merkle.root_from_leaf_hashes(leaves)
    assert frontier == [nodes[n] for n in merkle.frontier_nodes(len(leaves))]
    assert nodes == merkle.complete_nodes(leaves)
