"""The freshness factors (``adjusted`` of every model, the medals' freshness) are ``0.5 ** y`` by the C
library's ``pow``, as the plain-Python reference computes them, whatever numpy's vector width.

They were numpy's ``power``, whose AVX-512 code gives another last bit than ``pow`` for about 1 argument
in 20: where ``total · 0.5^y`` or ``0.5^y · 10^6`` lies that close to a rounding boundary, the published
integer or 10^-6 number depended on the CPU (Intel or Zen 4 with AVX-512 against machines without it,
or numpy told to skip AVX-512 by NPY_DISABLE_CPU_FEATURES), and the engine disagreed with the reference.
The cases below were found by searching ages around each boundary; each rounds differently by the two."""

from __future__ import annotations

import datetime as dt
import math

import numpy as np
import pytest

from trustscore.scoring import EvidenceBatch, load_weights, score_agents
from trustscore.scoring.engine import freshness_adjusted
from trustscore.scoring.kernels import F64, HALF_UP_TOLERANCE, I64, powers_of_half, rounded_powers_of_half
from trustscore.scoring.medals import load_medal_rules, medals_of, medals_path
from trustscore.scoring.times import MICROS_PER_DAY, to_micros

from .conftest import AT, WEIGHTS, item

AT_MICROS = to_micros(AT)
BASELINE = load_weights(WEIGHTS / "baseline-v0.3.toml")
V2 = load_weights(WEIGHTS / "trustscore-v2.toml")
RULES = load_medal_rules(medals_path(WEIGHTS, "trustscore-v2"), V2)

# (total, age of the newest counted item in microseconds, adjusted by the reference's formula)
ADJUSTED = [
    (397, 674_257_315_194, 332),
    (421, 7_015_116_242_589, 65),
    (486, 1_937_242_566_891, 290),
    (528, 4_076_487_401_694, 178),
    (602, 515_343_291_168, 525),
]
# (age of the newest real item in microseconds, its published freshness factor)
FRESHNESS = [(3_355_948_816_900, 0.407612), (1_878_937_593_926, 0.60504), (51_021_864_902, 0.986449)]


def reference_adjusted(total: int, age: int, half_life: float) -> int:
    """scoring/reference.py's formula: Python's float ``**``."""
    factor: float = 0.5 ** ((age / MICROS_PER_DAY) / half_life)
    return math.floor(total * factor + 0.5 + HALF_UP_TOLERANCE)


@pytest.mark.parametrize(("total", "age", "adjusted"), ADJUSTED)
def test_adjusted_is_the_references_at_a_rounding_boundary(total: int, age: int, adjusted: int) -> None:
    half_life = BASELINE.spec.freshness.half_life_days
    assert half_life == 30.0  # the cases were found for it
    assert reference_adjusted(total, age, half_life) == adjusted
    got = freshness_adjusted(
        np.array([float(total)]), np.array([AT_MICROS - age]), np.array([1]), AT_MICROS, BASELINE
    )
    assert got.tolist() == [adjusted]


@pytest.mark.parametrize(("age", "freshness"), FRESHNESS)
def test_a_medals_freshness_is_the_pow_of_its_age(age: int, freshness: float) -> None:
    assert RULES.spec.half_life_days == 30.0
    assert round(math.pow(0.5, age / MICROS_PER_DAY / 30.0) * 1e6) / 1e6 == freshness
    items = [item(at=AT - dt.timedelta(microseconds=age), key="k")]
    [rating] = score_agents(items, None, V2, AT, agents=["a"])
    [m] = medals_of(EvidenceBatch.from_items(items), [rating], RULES, AT_MICROS)
    assert m.dimensions["capability"].freshness == freshness


def test_powers_of_half_is_pow_element_by_element() -> None:
    rng = np.random.default_rng(11)
    y = np.concatenate(
        (rng.uniform(-50, 200, 20_000), [0.0, -0.0, 1.0, 1074.0, 1075.0, np.inf, -np.inf, np.nan])
    )
    got = powers_of_half(y)
    expected = [math.pow(0.5, v) for v in y.tolist()]
    assert got.dtype == np.float64
    assert np.array_equal(got, expected, equal_nan=True)
    assert powers_of_half(y.reshape(4, -1)).shape == (4, y.size // 4)  # any shape


def test_powers_of_half_overflows_to_infinity_as_numpy_did() -> None:
    """0.5 ** -2000 overflows: math.pow raises, numpy gave inf; the medals read it only where masked."""
    got = powers_of_half(np.array([-2000.0, 3.0, -1e300]))
    assert got.tolist() == [math.inf, 0.125, math.inf]
    assert powers_of_half(np.zeros(0)).shape == (0,)


def _ages_next_to_boundaries(targets: F64, half_life: float, spread: int) -> I64:
    """Ages in microseconds whose factor 0.5^(age / day / half_life) lies next to each of ``targets``."""
    ages = np.round(-np.log2(targets) * half_life * MICROS_PER_DAY).astype(np.int64)
    found: I64 = (ages[:, None] + np.arange(-spread, spread + 1)[None, :]).ravel()
    return found


def test_adjusted_is_the_references_next_to_every_boundary() -> None:
    """Totals 100..1000, each adjusted value k, ages around the one that makes total · factor = k + 0.5:
    numpy's power first, pow where it could round otherwise (kernels.rounded_powers_of_half), equals the
    reference's ** on every one (among them the cases where numpy's own power rounds otherwise)."""
    totals, ages = [], []
    for whole in range(100, 1001, 9):
        k = np.arange(1, whole)
        found = _ages_next_to_boundaries((k + 0.5 - HALF_UP_TOLERANCE) / whole, 30.0, 2)
        totals.append(np.full(found.size, float(whole)))
        ages.append(found)
    total, age = np.concatenate(totals), np.concatenate(ages)
    got = freshness_adjusted(total, AT_MICROS - age, np.ones(age.size, dtype=np.int64), AT_MICROS, BASELINE)
    expected = [
        reference_adjusted(int(t), int(a), 30.0) for t, a in zip(total.tolist(), age.tolist(), strict=True)
    ]
    assert got.tolist() == expected
    numpy_own = np.floor(total * np.power(0.5, age / MICROS_PER_DAY / 30.0) + 0.5 + HALF_UP_TOLERANCE)
    print(f"{age.size} cases, numpy's power alone rounds {int((numpy_own != got).sum())} otherwise")


def test_rounded_powers_of_half_is_pow_then_rounding() -> None:
    rng = np.random.default_rng(5)
    targets = (np.arange(1, 1_000_000, 3, dtype=np.float64) + 0.5) / 1e6  # freshness k.5e-6
    near = _ages_next_to_boundaries(targets.astype(np.float64), 30.0, 1) / MICROS_PER_DAY / 30.0
    # Old items (a product below the window: the ends round to -0.0 and 0.0, review), and specials.
    y = np.concatenate((near, rng.uniform(-10, 80, 50_000), [60.0, 75.0, np.nan, np.inf, -np.inf, 0.0, 1e6]))
    scale = np.full(y.size, 1e6)
    scale[-1] = 0.0
    with np.errstate(over="ignore"):
        got = rounded_powers_of_half(y, scale, np.round)
    expected = np.round(scale * powers_of_half(y))
    assert got.view(np.int64).tolist() == expected.view(np.int64).tolist()  # to the bit: -0.0 is not 0.0
    assert not np.signbit(got[np.isfinite(got)]).any()


def test_rounded_powers_of_half_raises_what_numpys_power_raised() -> None:
    """Under np.errstate(all="raise") the window adds no error of its own (review: 0.5^-1024 plus the
    window overflowed); numpy's power and the product raise as they did before."""
    with np.errstate(all="raise"):
        got = rounded_powers_of_half(np.array([-1024 + 5e-10, 3.0]), np.array([1.0, 8.0]), np.floor)
        assert got.tolist() == [math.floor(math.pow(0.5, -1024 + 5e-10)), 1.0]
        with pytest.raises(FloatingPointError):
            rounded_powers_of_half(np.array([-1100.0]), np.array([1.0]), np.floor)  # np.power overflows
    with pytest.raises(ValueError, match="one-dimensional"):
        rounded_powers_of_half(np.zeros((2, 2)), np.zeros((2, 2)), np.floor)
    with pytest.raises(ValueError, match="alike"):
        rounded_powers_of_half(np.zeros(3), np.zeros(2), np.floor)
