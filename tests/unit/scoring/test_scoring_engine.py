"""Paths of the engine that typical inputs do not take: sparse key spaces and duplicate tie-breakers."""

from __future__ import annotations

import dataclasses

import msgspec
import numpy as np
import pytest

from trustscore.errors import InvalidInput
from trustscore.scoring import EvidenceBatch, SnapshotBatch, Weights, score_agents
from trustscore.scoring.kernels import dense_codes

from .conftest import AT, days_ago, item


def test_sparse_key_codes_rate_like_dense_ones(baseline: Weights, model: Weights) -> None:
    items = [
        item("a", key="q1", value=0.2, at=days_ago(3)),
        item("a", key="q1", value=0.9, at=days_ago(1)),
        item("b", key="q1", value=0.4),
        item("b", key="q2", value=0.6, at=days_ago(2)),
        item("b", key="q2", value=0.1, at=days_ago(2)),
    ]
    dense = EvidenceBatch.from_items(items)
    # Key codes only need to be equal for equal keys: spread them far apart (the engine numbers the
    # (agent, key) pairs densely instead of indexing an array of agents x keys).
    sparse = dataclasses.replace(dense, key=np.where(dense.key >= 0, dense.key * 3_000_000 + 7, -1))
    for weights in (baseline, model):
        expected = msgspec.json.encode(score_agents(dense, SnapshotBatch.empty(), weights, AT))
        assert msgspec.json.encode(score_agents(sparse, SnapshotBatch.empty(), weights, AT)) == expected


def test_rows_sharing_key_time_and_seq_are_refused(baseline: Weights) -> None:
    same = days_ago(1)
    batch = EvidenceBatch.from_items([item(key="q", at=same), item(key="q", at=same)], seq=[4, 4])
    with pytest.raises(InvalidInput, match="seq must break ties"):
        score_agents(batch, None, baseline, AT)


def test_dense_codes_number_distinct_values_in_order() -> None:
    key = np.array([50, 3, 50, 1 << 40, 3, 0], dtype=np.int64)
    codes, distinct = dense_codes(key)
    expected_distinct, expected_codes = np.unique(key, return_inverse=True)
    assert distinct.tolist() == expected_distinct.tolist()
    assert codes.tolist() == expected_codes.tolist()


@pytest.mark.parametrize(
    ("column", "dtype", "message"),
    [
        ("key", np.uint64, "key must hold signed integers"),
        ("agent", np.float64, "agent must hold integers"),
        ("dimension", np.float32, "dimension must hold integers"),
        ("source", np.float64, "source must hold integers"),
        ("result", np.float64, "result must hold integers"),
    ],
)
def test_columns_of_a_kind_the_engine_cannot_compute_with_are_refused(
    baseline: Weights, column: str, dtype: type, message: str
) -> None:
    """Each of these stopped the engine with a numpy error (a cast, an index); now with InvalidInput
    naming the column."""
    batch = EvidenceBatch.from_items([item(key="q", at=days_ago(1)), item(key="r", value=0.5)])
    odd = dataclasses.replace(batch, **{column: getattr(batch, column).astype(dtype)})
    with pytest.raises(InvalidInput, match=message):
        score_agents(odd, None, baseline, AT)
