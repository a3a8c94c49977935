"""fsck streamed in batches: the same verdict as the whole log at once, whatever the batch sizes."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st
from tests.helpers import new_card

from trustscore.ledger import audit, dsse, merkle


def _leaves(n: int) -> list[bytes]:
    return [dsse.leaf_bytes(new_card(f"a{i}")[1]) for i in range(n)]


LEAVES = _leaves(40)
HASHES = [merkle.leaf_hash(leaf) for leaf in LEAVES]
NODES = merkle.complete_nodes(HASHES)


def _root(size: int) -> bytes:
    return merkle.root_from_leaf_hashes(HASHES[:size])


def _streamed(
    leaves: list[bytes],
    checkpoints: list[tuple[int, bytes]],
    cuts: list[int],
    nodes: dict[tuple[int, int], bytes],
) -> audit.FsckReport:
    check = audit.Fsck(checkpoints)
    bounds = sorted({0, len(leaves), *(c for c in cuts if c < len(leaves))})
    for a, b in itertools.pairwise(bounds):
        check.compare_nodes(check.feed(leaves[a:b]), nodes)
    return check.finish()


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(0, 40),
    sizes=st.lists(st.integers(0, 40), max_size=5),
    cuts=st.lists(st.integers(1, 39), max_size=6),
)
def test_batches_give_the_verdict_of_one_pass(n: int, sizes: list[int], cuts: list[int]) -> None:
    checkpoints = [(s, _root(s)) for s in sizes if s <= n]
    whole = audit.fsck(LEAVES[:n], checkpoints, stored_nodes=NODES)
    streamed = _streamed(LEAVES[:n], checkpoints, cuts, NODES)
    assert streamed == whole
    assert whole.clean
    assert (
        whole.root_matches == bool(checkpoints and max(checkpoints)[0] > 0)
        or not checkpoints
        or max(checkpoints)[0] == 0
    )


def test_a_wrong_root_a_missing_node_and_a_short_log_are_reported() -> None:
    bad_root = [(10, _root(10)), (20, _root(19))]
    report = _streamed(LEAVES[:30], bad_root, [7, 15], NODES)
    assert report.problems == ["checkpoint at size 20 does not match the entries"]
    missing = dict(NODES)
    del missing[(2, 3)]
    report = _streamed(LEAVES[:30], [(30, _root(30))], [5], missing)
    assert report.problems == ["stored tree node (2, 3) is missing or wrong"] and report.root_matches
    report = _streamed(LEAVES[:10], [(12, _root(12))], [3], NODES)
    assert report.problems == ["checkpoint covers 12 entries but only 10 exist"]


def test_a_key_counts_only_after_its_card() -> None:
    report = audit.fsck(
        [b"{}", *LEAVES[:3]], [(4, merkle.root_from_leaf_hashes([merkle.leaf_hash(b"{}"), *HASHES[:3]]))]
    )
    assert report.root_matches and len(report.problems) == 1 and report.problems[0].startswith("entry 0:")
