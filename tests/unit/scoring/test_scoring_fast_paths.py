"""The engine's faster ways to the same numbers, each against the plain way it replaces, bit for bit.

Every released model's outputs are pinned as a whole (``test_scoring_pinned.py``); these tests reach the
corners the pinned columns may not: block boundaries, sizes that force the slow path, negative and huge
field values, repeated names.
"""

from __future__ import annotations

import dataclasses
from typing import TypeVar

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustscore.errors import InvalidInput
from trustscore.scoring import anchored, engine, load_weights
from trustscore.scoring.anchored import _COEFFICIENTS, exp2
from trustscore.scoring.engine import score_columns
from trustscore.scoring.inputs import EvidenceBatch, SnapshotBatch
from trustscore.scoring.kernels import F64, I64, ascending_sums, dense_codes, sums_in_order, table_order

from .conftest import WEIGHTS
from .test_scoring_pinned import AT, columns_digest, rich_evidence

Batch = TypeVar("Batch", EvidenceBatch, SnapshotBatch)


def one_pass_exp2(x: F64) -> F64:
    """exp2 as it was before blocks: every step over the whole array at once."""
    k = np.rint(x)
    f = x - k
    p = np.full(x.shape, _COEFFICIENTS[-1])
    for c in reversed(_COEFFICIENTS[:-1]):
        p *= f
        p += c
    out: F64 = np.ldexp(p, k.astype(np.int64))
    return out


@pytest.mark.parametrize(
    "size", [0, 1, anchored._BLOCK - 1, anchored._BLOCK, anchored._BLOCK + 1, 3 * anchored._BLOCK + 7]
)
def test_exp2_in_blocks_is_exp2_in_one_pass(size: int) -> None:
    x = np.random.default_rng(size).uniform(-1021.0, 1021.0, size)
    x[: min(size, 4)] = [0.5, -0.5, 1021.0, -1021.0][: min(size, 4)]
    assert exp2(x).view(np.int64).tolist() == one_pass_exp2(x).view(np.int64).tolist()


def test_exp2_keeps_the_shape_and_reads_views() -> None:
    x = np.random.default_rng(1).uniform(-40.0, 40.0, (3, anchored._BLOCK + 5))
    assert exp2(x).shape == x.shape
    assert np.array_equal(exp2(x).view(np.int64), one_pass_exp2(x).view(np.int64))
    strided = x[:, ::3]  # not contiguous
    assert np.array_equal(exp2(strided).view(np.int64), one_pass_exp2(strided).view(np.int64))


def lexsorted(
    agent: I64, when: I64, version: I64, total: I64, has_total: np.ndarray
) -> tuple[list[int], list[int], list[int], list[bool]]:
    order = np.lexsort((total, has_total, version, when, agent))
    return agent[order].tolist(), version[order].tolist(), total[order].tolist(), has_total[order].tolist()


snapshot_rows = st.lists(
    st.tuples(
        st.integers(0, 6),
        st.sampled_from([-(2**62), -5, 0, 1, 2, 1_700_000_000_000_000, 2**62]),
        st.integers(0, 2),
        st.sampled_from([-(2**53), -3, 0, 7, 500, 2**53]),
        st.booleans(),
    ),
    max_size=40,
)


@settings(max_examples=300, deadline=None)
@given(snapshot_rows, st.booleans())
def test_snapshot_order_is_the_lexsort(
    rows: list[tuple[int, int, int, int, bool]], huge_agents: bool
) -> None:
    columns = [np.array([r[i] for r in rows], dtype=np.int64) for i in range(4)]
    agent, when, version, total = columns
    if huge_agents:  # codes too wide to pack beside the ranks: the lexsort path
        agent = agent << 58
    has_total = np.array([r[4] for r in rows], dtype=np.bool_)
    got = engine._snapshot_order(agent, when, version, total, has_total)
    assert tuple(g.tolist() for g in got) == lexsorted(agent, when, version, total, has_total)


def test_snapshot_order_of_many_distinct_fields_falls_back_and_agrees() -> None:
    rng = np.random.default_rng(3)
    n = 5_000
    agent = rng.integers(0, 1 << 40, n)  # 40 + 13 + 13 + 2 + 1 bits: more than an int64 holds
    when, total = rng.integers(-(2**62), 2**62, n), rng.integers(-(2**53), 2**53, n)
    version, has_total = rng.integers(0, 3, n), rng.random(n) < 0.8
    got = engine._snapshot_order(agent, when, version, total, has_total)
    assert tuple(g.tolist() for g in got) == lexsorted(agent, when, version, total, has_total)


def test_the_agent_universe_shortcut_only_takes_one_sorted_table() -> None:
    def universe(evidence_agents: tuple[str, ...], snapshot_agents: tuple[str, ...]) -> tuple[str, ...]:
        evidence = EvidenceBatch.from_items([])
        snapshots = SnapshotBatch.empty()
        return engine._agent_universe(
            _with_agents(evidence, evidence_agents), _with_agents(snapshots, snapshot_agents), None
        )

    for tables in [
        (("a", "b", "c"), ("a", "b", "c")),
        (("b", "a"), ("b", "a")),
        (("a", "a", "b"), ("a", "a", "b")),
        (("a", "c"), ("b",)),
        ((), ()),
    ]:
        assert universe(*tables) == tuple(sorted(set(tables[0]) | set(tables[1])))


def test_rank_codes_of_the_names_themselves() -> None:
    names = ("a", "b", "c")
    assert engine._rank_codes(names, names).tolist() == [0, 1, 2]
    assert engine._rank_codes(("c", "x", "a"), names).tolist() == [2, -1, 0]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.integers(0, 2), st.integers(0, 4)), max_size=50))
def test_source_weight_sums_share_one_gather(rows: list[tuple[int, int, int]]) -> None:
    table = np.array([0.3, 0.1, 1.0, 0.1, 0.7])
    agent = np.array([r[0] for r in rows], dtype=np.int64)
    dim = np.array([r[1] for r in rows], dtype=np.int64)
    source = np.array([r[2] for r in rows], dtype=np.int64)
    n_agents, n_dims = 4, 3
    counted = engine.CountedRows(
        names=("a", "b", "c", "d"),
        agent=agent,
        cell=agent * n_dims + dim,
        when=np.zeros(agent.size, dtype=np.int64),
        value=np.zeros(agent.size),
        source_weight=table[source],
        sw_order=table_order(source, table),
        extra_weight=np.ones(agent.size),
        issuer=None,
        consistency=np.full(n_agents, np.nan),
    )
    per_cell, per_agent = engine._source_weight_sums(counted, n_dims)
    cells = n_agents * n_dims
    expected_cell = sums_in_order(counted.cell, counted.source_weight, cells, counted.sw_order)
    expected_agent = sums_in_order(agent, counted.source_weight, n_agents, counted.sw_order)
    assert per_cell.view(np.int64).tolist() == expected_cell.view(np.int64).tolist()  # -0.0 is not 0.0
    assert per_agent.view(np.int64).tolist() == expected_agent.view(np.int64).tolist()


def _with_agents(batch: Batch, agents: tuple[str, ...]) -> Batch:
    return dataclasses.replace(batch, agents=agents)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(-(2**63), 2**63 - 1), max_size=40), st.booleans())
def test_dense_codes_are_numpy_unique(keys: list[int], small: bool) -> None:
    """Negative keys included: (agent, key) pairs of huge key codes wrap around in int64."""
    key = np.array([k % 1000 if small else k for k in keys], dtype=np.int64)  # small: the packed path
    codes, distinct = dense_codes(key)
    expected_distinct, expected_codes = np.unique(key, return_inverse=True)
    assert distinct.tolist() == expected_distinct.tolist()
    assert codes.tolist() == expected_codes.reshape(-1).tolist()


def recoded(evidence: EvidenceBatch, seed: int) -> EvidenceBatch:
    """The same evidence with its agent and dimension tables shuffled and the codes to match."""
    rng = np.random.default_rng(seed)
    agent_perm, dim_perm = rng.permutation(len(evidence.agents)), rng.permutation(len(evidence.dimensions))
    agent_code, dim_code = np.argsort(agent_perm), np.argsort(dim_perm)
    return dataclasses.replace(
        evidence,
        agents=tuple(evidence.agents[i] for i in agent_perm),
        dimensions=tuple(evidence.dimensions[i] for i in dim_perm),
        agent=agent_code[evidence.agent],
        dimension=dim_code[evidence.dimension],
    )


@pytest.mark.parametrize("model", ["baseline-v0.3", "trustscore-v1", "trustscore-v2", "trustscore-v3"])
def test_tables_in_any_order_rate_alike(model: str) -> None:
    """The shortcuts for the batch's own sorted tables (no recoding of agents or dimensions) give what the
    recoding gives."""
    weights = load_weights(WEIGHTS / f"{model}.toml")
    evidence, snapshots = rich_evidence()
    assert evidence.agents == tuple(sorted(evidence.agents))
    expected = columns_digest(score_columns(evidence, snapshots, weights, AT))
    for seed in range(3):
        shuffled = recoded(evidence, seed)
        assert shuffled.agents != evidence.agents
        assert columns_digest(score_columns(shuffled, snapshots, weights, AT)) == expected


def test_rows_at_the_earliest_time_compete_like_any_other() -> None:
    """The quick one-winner-per-key check counts keys by their newest time; a row at INT64_MIN (no
    newest time above the fill value) takes the exact check instead."""
    earliest = np.iinfo(np.int64).min
    agent = np.zeros(4, dtype=np.int64)
    key = np.array([0, 0, 1, 1], dtype=np.int64)
    at = np.array([earliest, earliest, 5, 6], dtype=np.int64)
    keep = np.ones(4, dtype=np.bool_)
    winners = engine._newest_per_key(agent, key, at, np.array([1, 2, 3, 4], dtype=np.int64), keep)
    assert winners.tolist() == [False, True, False, True]
    with pytest.raises(InvalidInput, match="seq must break ties"):
        engine._newest_per_key(agent, key, at, np.array([2, 2, 3, 4], dtype=np.int64), keep)
    tied = np.array([earliest, earliest, 6, 6], dtype=np.int64)  # key 1's two rows: same time and seq
    with pytest.raises(InvalidInput, match="seq must break ties"):
        engine._newest_per_key(agent, key, tied, np.array([1, 2, 4, 4], dtype=np.int64), keep)


def plain_newest_per_key(agent: I64, key: I64, at: I64, seq: I64, keep: list[bool]) -> list[bool]:
    """The rule itself: a kept keyed row is out if another kept row of its (agent, key) is newer by
    (at, seq)."""
    newest: dict[tuple[int, int], tuple[int, int]] = {}
    for i in range(agent.size):
        if keep[i] and key[i] >= 0:
            pair, stamp = (int(agent[i]), int(key[i])), (int(at[i]), int(seq[i]))
            newest[pair] = max(newest.get(pair, stamp), stamp)
    return [
        not (keep[i] and key[i] >= 0 and newest[int(agent[i]), int(key[i])] != (int(at[i]), int(seq[i])))
        for i in range(agent.size)
    ]


@given(
    rows=st.lists(
        st.tuples(
            st.integers(0, 3),  # agent
            st.integers(-1, 3),  # key (-1: none)
            st.sampled_from([np.iinfo(np.int64).min, -5, 0, 1, 2, 7, np.iinfo(np.int64).max]),  # at: ties
            st.booleans(),  # kept
        ),
        max_size=40,
    ),
    seed=st.integers(0, 2**32 - 1),
)
@settings(max_examples=300, deadline=None)
def test_newest_per_key_is_the_rule(rows: list[tuple[int, int, int, bool]], seed: int) -> None:
    """With or without ties at a key's newest time (the quick path takes only keys with one row there),
    the winners are the rule's; distinct seqs, so no input is refused."""
    agent, key, at = (np.array([r[i] for r in rows], dtype=np.int64) for i in range(3))
    keep = [r[3] for r in rows]
    seq = np.random.default_rng(seed).permutation(len(rows)).astype(np.int64)
    got = engine._newest_per_key(agent, key, at, seq, np.array(keep, dtype=np.bool_))
    assert got.tolist() == plain_newest_per_key(agent, key, at, seq, keep)


@pytest.mark.parametrize("model", ["baseline-v0.3", "trustscore-v1", "trustscore-v2", "trustscore-v3"])
def test_narrow_columns_rate_as_their_int64_and_float64_values(model: str) -> None:
    """The shortcuts use codes and values as the batch holds them: a batch of int32 codes and float32
    values (e.g. from Arrow) rates as the same numbers widened, as it did when every column was recoded."""
    weights = load_weights(WEIGHTS / f"{model}.toml")
    evidence, snapshots = rich_evidence()
    narrow = dataclasses.replace(
        evidence,
        agent=evidence.agent.astype(np.int32),
        dimension=evidence.dimension.astype(np.int32),
        key=evidence.key.astype(np.int32),
        value=evidence.value.astype(np.float32),
        extra_weight=evidence.extra_weight.astype(np.float32),
    )
    wide = dataclasses.replace(
        evidence,
        value=narrow.value.astype(np.float64),
        extra_weight=narrow.extra_weight.astype(np.float64),
    )
    expected = columns_digest(score_columns(wide, snapshots, weights, AT))
    assert columns_digest(score_columns(narrow, snapshots, weights, AT)) == expected


@pytest.mark.parametrize("model", ["baseline-v0.3", "trustscore-v1", "trustscore-v2", "trustscore-v3"])
def test_the_callers_columns_are_only_read(model: str) -> None:
    """Work in place is on the engine's own copies: read-only input columns rate, and stay as they were."""
    weights = load_weights(WEIGHTS / f"{model}.toml")
    evidence, snapshots = rich_evidence()
    before = columns_digest(score_columns(evidence, snapshots, weights, AT))
    for batch in (evidence, snapshots):
        for field in dataclasses.fields(batch):
            column = getattr(batch, field.name)
            if isinstance(column, np.ndarray):
                column.flags.writeable = False
    assert columns_digest(score_columns(evidence, snapshots, weights, AT)) == before


def test_many_zero_terms_are_left_out_without_changing_a_sum() -> None:
    rng = np.random.default_rng(9)
    group = rng.integers(0, 50, 4_000)
    x = np.where(rng.random(4_000) < 0.7, rng.choice([0.0, -0.0], 4_000), rng.random(4_000))
    expected = np.zeros(50)
    for g in range(50):
        for term in sorted(x[group == g] + 0.0):
            expected[g] += term
    assert ascending_sums(group, x, 50).view(np.int64).tolist() == expected.view(np.int64).tolist()


@pytest.mark.parametrize("model", ["baseline-v0.3", "trustscore-v2"])
def test_key_codes_too_large_to_pair_with_agents_rate_like_small_ones(model: str) -> None:
    """(agent, key) as agent · (largest key + 1) + key wraps around in int64 when the largest key code is
    2^61 - 1: agents 8 apart then shared one (agent, key) group, and one's row superseded the other's
    (before session 14). Keys are now numbered densely first when the pairs would not fit."""
    weights = load_weights(WEIGHTS / f"{model}.toml")
    evidence, snapshots = rich_evidence()
    largest = np.where(evidence.key == 11, (1 << 61) - 1, evidence.key)  # key 11 renamed: same keys
    huge = dataclasses.replace(evidence, key=largest)
    expected = columns_digest(score_columns(evidence, snapshots, weights, AT))
    assert columns_digest(score_columns(huge, snapshots, weights, AT)) == expected
