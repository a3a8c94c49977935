"""The deterministic reductions under the engine."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from trustscore.scoring.kernels import (
    ascending_order,
    ascending_sums,
    exclusive_prefix_sums,
    key_order,
    round_half_up,
    sums_in_order,
    sums_near_order,
    table_order,
)


def python_sums(group: list[int], x: list[float], groups: int) -> list[float]:
    out = []
    for g in range(groups):
        acc = 0.0
        for v in sorted(v for gg, v in zip(group, x, strict=True) if gg == g):
            acc += v
        out.append(acc)
    return out


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.floats(0.0, 1e6)), max_size=60))
def test_ascending_sums_match_python(rows: list[tuple[int, float]]) -> None:
    group = np.array([g for g, _ in rows], dtype=np.int64)
    x = np.array([v for _, v in rows], dtype=np.float64)
    assert ascending_sums(group, x, 5).tolist() == python_sums(group.tolist(), x.tolist(), 5)


def test_values_equal_in_the_top_bits_are_still_sorted_exactly() -> None:
    base = 0.3
    close = [np.nextafter(base, 1.0) * 1.0, base, float(np.nextafter(np.nextafter(base, 1.0), 1.0))]
    x = np.array(close * 3 + [1e-300, 0.0, -0.0])
    group = np.zeros(x.size, dtype=np.int64)
    order = ascending_order(group, x)
    assert np.all(np.diff(x[order] + 0.0) >= 0)
    assert ascending_sums(group, x, 1).tolist() == python_sums([0] * x.size, (x + 0.0).tolist(), 1)


def test_large_group_ids_take_the_exact_path() -> None:
    group = np.array([1 << 30, 1 << 30, 5], dtype=np.int64)
    x = np.array([0.2, 0.1, 0.7])
    assert ascending_order(group, x).tolist() == [2, 1, 0]


def test_exclusive_prefix_sums_stay_within_runs() -> None:
    values = np.array([1.0, 2.0, 3.0, 10.0, 20.0, 5.0])
    starts = np.array([0, 3, 5])
    assert exclusive_prefix_sums(values, starts).tolist() == [0.0, 1.0, 3.0, 0.0, 10.0, 0.0]


def test_round_half_up() -> None:
    assert round_half_up(np.array([0.5, 1.5, 2.5, 2.4999, 34.5])).tolist() == [1.0, 2.0, 3.0, 2.0, 35.0]


def _ulps_from(v: float) -> st.SearchStrategy[float]:
    return st.integers(0, 3).map(lambda k: float(v + k * np.spacing(v)))


near = st.sampled_from([0.3, 0.21, 0.1 + 0.2, 0.7 * 0.3, 1e-300, 0.0, -0.0, 1.0]).flatmap(_ulps_from)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), near), max_size=80), st.sampled_from([0, 1 << 20, 1 << 52]))
def test_ascending_sums_of_near_equal_values(rows: list[tuple[int, float]], offset: int) -> None:
    # Values that agree in their top bits force the exact re-sort; a huge group id forces the lexsort.
    group = np.array([g + offset for g, _ in rows], dtype=np.int64)
    x = np.abs(np.array([v for _, v in rows], dtype=np.float64))
    groups = offset + 4 if offset < (1 << 30) else None
    order = ascending_order(group, x)
    keys = list(zip(group[order].tolist(), (x[order] + 0.0).tolist(), strict=True))
    assert keys == sorted(keys)
    if groups is not None:
        expected = python_sums((group - offset).tolist(), x.tolist(), 4)
        assert ascending_sums(group, x, groups)[offset:].tolist() == expected


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 5)), max_size=60))
def test_one_ascending_order_serves_every_grouping(rows: list[tuple[int, int]]) -> None:
    table = np.array([0.3, 0.2, 1.0, 0.3, 0.9, 0.6])
    code = np.array([c for _, c in rows], dtype=np.int64)
    group = np.array([g for g, _ in rows], dtype=np.int64)
    x = table[code]
    expected = python_sums(group.tolist(), x.tolist(), 5)
    for order in (table_order(code, table), np.argsort(x).astype(np.int64)):
        assert sums_in_order(group, x, 5, order).tolist() == expected
        assert sums_in_order(np.zeros_like(group), x, 1, order).tolist() == python_sums(
            [0] * x.size, x.tolist(), 1
        )


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, (1 << 62) - 1) | st.integers(0, 9), max_size=60))
def test_key_order_sorts(keys: list[int]) -> None:
    key = np.array(keys, dtype=np.int64)
    assert key[key_order(key)].tolist() == sorted(keys)


def test_many_runs_to_re_sort_in_a_large_column() -> None:
    # Thousands of groups whose values agree in the packed top bits but not below, beside zero terms
    # (left out of the sort) and values of every magnitude: the runs are found and re-sorted exactly.
    rng = np.random.default_rng(5)
    n = 200_000
    group = rng.integers(0, 20_000, n)
    base = rng.choice([0.3, 0.7 * 0.3, 1e-5, 0.999], n)
    x = base + rng.integers(0, 64, n) * np.spacing(base)
    x[rng.random(n) < 0.2] = 0.0
    order = np.lexsort((x, group))
    expected = np.bincount(group[order], weights=x[order], minlength=20_000)
    assert ascending_sums(group, x, 20_000).tobytes() == expected.tobytes()
    by_order = ascending_order(group, x)
    assert np.array_equal(group[by_order], group[order]) and np.array_equal(x[by_order], x[order])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), near), max_size=60), st.integers(0, 2**32 - 1))
def test_sums_near_an_order_are_the_ascending_sums(rows: list[tuple[int, float]], seed: int) -> None:
    # The hint sorts by group but leaves any order within a group (as a scaled weight may): every group
    # out of order is re-sorted, and the sums are the ascending ones, bit for bit.
    group = np.array([g for g, _ in rows], dtype=np.int64)
    x = np.abs(np.array([v for _, v in rows], dtype=np.float64))
    shuffle = np.random.default_rng(seed).permutation(x.size)
    hint = shuffle[np.argsort(group[shuffle], kind="stable")].astype(np.int64)
    assert sums_near_order(group, x, 5, hint).tolist() == python_sums(group.tolist(), x.tolist(), 5)
