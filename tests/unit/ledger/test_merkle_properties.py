"""Hypothesis properties of the Merkle core at random tree sizes (1..2000)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustscore.errors import ProofError
from trustscore.ledger import merkle

MAX = 2000
LEAVES = [merkle.leaf_hash(b"entry-%d" % i) for i in range(MAX)]
NODES = merkle.complete_nodes(LEAVES)  # every complete subtree of the 2000-leaf tree
ROOTS = [merkle.root_from_leaf_hashes(LEAVES[:n]) for n in range(MAX + 1)]

sizes = st.integers(min_value=1, max_value=MAX)


@st.composite
def size_and_index(draw: st.DrawFn) -> tuple[int, int]:
    size = draw(sizes)
    return size, draw(st.integers(min_value=0, max_value=size - 1))


@st.composite
def two_sizes(draw: st.DrawFn) -> tuple[int, int]:
    size2 = draw(sizes)
    return draw(st.integers(min_value=1, max_value=size2)), size2


@given(size_and_index())
def test_generated_inclusion_proofs_verify(case: tuple[int, int]) -> None:
    size, index = case
    proof = merkle.inclusion_proof(index, size, LEAVES)
    assert merkle.verify_inclusion(LEAVES[index], index, size, proof, ROOTS[size]) == ROOTS[size]
    # The store path (nodes of the biggest tree; complete subtrees never change) gives the same proof.
    ranges = merkle.inclusion_proof_ranges(index, size)
    assert merkle.assemble(ranges, NODES) == proof
    assert len(merkle.required_nodes(ranges)) <= 2 * size.bit_length()


@given(two_sizes())
def test_generated_consistency_proofs_verify(case: tuple[int, int]) -> None:
    size1, size2 = case
    proof = merkle.consistency_proof(size1, size2, LEAVES)
    assert merkle.verify_consistency(size1, size2, proof, ROOTS[size1], ROOTS[size2]) == ROOTS[size2]
    assert merkle.root_from_consistency_proof(size1, size2, proof, ROOTS[size1]) == ROOTS[size2]
    ranges = merkle.consistency_proof_ranges(size1, size2)
    assert merkle.assemble(ranges, NODES) == proof
    assert len(merkle.required_nodes(ranges)) <= 2 * size2.bit_length()


def _flip_a_bit(proof: list[bytes], data: st.DataObject) -> list[bytes]:
    at = data.draw(st.integers(0, len(proof) - 1))
    bit = data.draw(st.integers(0, 8 * merkle.HASH_SIZE - 1))
    bad = [bytearray(h) for h in proof]
    bad[at][bit // 8] ^= 1 << (bit % 8)
    return [bytes(h) for h in bad]


@given(size_and_index(), st.data())
def test_flipped_bit_in_inclusion_proof_fails(case: tuple[int, int], data: st.DataObject) -> None:
    size, index = case
    proof = merkle.inclusion_proof(index, size, LEAVES)
    if proof:
        with pytest.raises(ProofError):
            merkle.verify_inclusion(LEAVES[index], index, size, _flip_a_bit(proof, data), ROOTS[size])


@given(two_sizes(), st.data())
def test_flipped_bit_in_consistency_proof_fails(case: tuple[int, int], data: st.DataObject) -> None:
    size1, size2 = case
    proof = merkle.consistency_proof(size1, size2, LEAVES)
    if proof:
        with pytest.raises(ProofError):
            merkle.verify_consistency(size1, size2, _flip_a_bit(proof, data), ROOTS[size1], ROOTS[size2])


@given(two_sizes())
def test_wrong_roots_fail_consistency(case: tuple[int, int]) -> None:
    size1, size2 = case
    if size1 == size2:
        return
    proof = merkle.consistency_proof(size1, size2, LEAVES)
    other = merkle.leaf_hash(b"not a root")
    with pytest.raises(ProofError):
        merkle.verify_consistency(size1, size2, proof, other, ROOTS[size2])
    with pytest.raises(ProofError):
        merkle.verify_consistency(size1, size2, proof, ROOTS[size1], other)


@settings(max_examples=60)
@given(sizes, st.lists(st.integers(min_value=1, max_value=300), max_size=40))
def test_extend_in_batches_equals_one_batch(size: int, cuts: list[int]) -> None:
    stored: dict[tuple[int, int], bytes] = {}
    frontier: list[bytes] = []
    done = 0
    for step in [*cuts, size]:
        upto = min(size, done + step)
        new, frontier = merkle.extend(done, frontier, LEAVES[done:upto])
        for level, index, h in new:
            assert (level, index) not in stored, "a node was completed twice"
            stored[(level, index)] = h
        done = upto
        assert merkle.root_from_nodes(done, stored) == ROOTS[done]
        assert frontier == [stored[n] for n in merkle.frontier_nodes(done)]
        if done == size:
            break
    one_batch, one_frontier = merkle.extend(0, [], LEAVES[:size])
    assert stored == {(level, index): h for level, index, h in one_batch}
    assert frontier == one_frontier
    assert stored == merkle.complete_nodes(LEAVES[:size])


@given(sizes)
def test_root_from_nodes_equals_reference(size: int) -> None:
    ranges = merkle.root_ranges(size)
    assert len(merkle.required_nodes(ranges)) == size.bit_count()
    assert merkle.root_from_nodes(size, NODES) == ROOTS[size]


def test_complete_nodes_hold_no_incomplete_subtree() -> None:
    for level, index in NODES:
        assert (index + 1) << level <= MAX
