"""ReporterWeights: built incrementally from snapshots in log order, queried as of an index."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.unit.evidence.signed import DIGEST, T0, new_id
from trustscore.errors import InvalidInput
from trustscore.evidence import ReporterWeights
from trustscore.evidence.reporters import REPORTER_MODEL, rating_weight
from trustscore.kinds.settlements import make_settlement
from trustscore.kinds.snapshots import RatingSnapshot, SnapshotRow, make_rating_snapshot
from trustscore.ledger import statements

A, B = sorted([new_id(), new_id()])


def snap(*rows: tuple[str, int | None, int | None]) -> RatingSnapshot:
    ratings = [SnapshotRow(agent=a, total=t, adjusted=adj) for a, t, adj in rows]
    return RatingSnapshot(
        nonce="n" * 16,
        issued_at=T0,
        signer=new_id(),
        model_version=REPORTER_MODEL,
        weights_digest=DIGEST,
        log_size=0,
        taken_at=T0,
        ratings=ratings,
    )


def test_unrated_reporters_weigh_one_half() -> None:
    w = ReporterWeights()
    assert w.weight(A, 100) == 0.5
    w.add(3, snap((B, 900, 900)))
    assert w.weight(A, 100) == 0.5


def test_only_snapshots_logged_before_the_index_count() -> None:
    w = ReporterWeights()
    w.add(3, snap((A, 1000, 600)))
    assert w.weight(A, 3) == 0.5  # the snapshot itself is not before index 3
    assert w.weight(A, 4) == 0.8
    w.add(10, snap((A, 200, 0)))
    assert w.weight(A, 4) == 0.8  # a later snapshot never changes an earlier answer
    assert w.weight(A, 10) == 0.8
    assert w.weight(A, 11) == 0.5
    assert w.rating(A, 11) == 0


def test_adjusted_first_then_total_then_unrated() -> None:
    w = ReporterWeights()
    w.add(1, snap((A, 400, None), (B, None, None)))
    assert w.weight(A, 2) == 0.7
    assert w.weight(B, 2) == 0.5


def test_the_newest_row_for_the_reporter_counts_even_from_an_older_snapshot() -> None:
    w = ReporterWeights()
    w.add(1, snap((A, 1000, 1000)))
    w.add(2, snap((B, 0, 0)))
    assert w.weight(A, 5) == 1.0


def test_snapshots_must_be_fed_in_log_order() -> None:
    w = ReporterWeights()
    w.add(5, snap())
    with pytest.raises(InvalidInput, match="log order"):
        w.add(5, snap())
    with pytest.raises(InvalidInput, match="log order"):
        w.add(4, snap())


def test_feed_ignores_other_kinds() -> None:
    w = ReporterWeights()
    other = statements.parse_statement(
        make_settlement(deal_id="d", seller=A, buyer=B, reporter_role="buyer", delivery="pass", settled_at=T0)
    )
    w.feed(0, other)
    row = SnapshotRow(agent=A, total=500, adjusted=500)
    payload = make_rating_snapshot(
        signer=new_id(),
        model_version=REPORTER_MODEL,
        weights_digest=DIGEST,
        log_size=1,
        taken_at=T0,
        ratings=[row],
    )
    w.feed(1, statements.parse_statement(payload))
    assert w.weight(A, 2) == 0.75


@given(st.lists(st.integers(0, 1000) | st.none(), min_size=1, max_size=20), st.integers(0, 25))
def test_incremental_equals_replay(ratings: list[int | None], before: int) -> None:
    """Feeding one snapshot at a time answers exactly like a rebuild from the prefix before the index."""
    incremental = ReporterWeights()
    for i, r in enumerate(ratings):
        incremental.add(i, snap((A, r, r)))
    prefix = ReporterWeights()
    for i, r in enumerate(ratings[:before]):
        prefix.add(i, snap((A, r, r)))
    assert incremental.weight(A, before) == prefix.weight(A, before)
    last = ratings[:before][-1] if ratings[:before] else None
    assert incremental.weight(A, before) == rating_weight(last)
    assert 0.5 <= incremental.weight(A, before) <= 1.0


def test_only_the_reporter_model_s_snapshots_count() -> None:
    weights = ReporterWeights()
    for model in ("baseline-v0.3", REPORTER_MODEL):
        snap = RatingSnapshot(
            nonce="n" * 32,
            issued_at=T0,
            signer=new_id(),
            model_version=model,
            weights_digest=DIGEST,
            log_size=1,
            taken_at=T0,
            ratings=[SnapshotRow(agent="a", total=900, adjusted=900)],
        )
        weights.add(1 if model.startswith("b") else 2, snap)
    assert weights.rating("a", 2) is None  # the baseline snapshot at 1 does not count
    assert weights.rating("a", 3) == 900
