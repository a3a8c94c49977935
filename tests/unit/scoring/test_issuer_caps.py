"""The issuer cap's quick "no cap needed" test never changes a factor: it reads sums taken in any order,
so it must send to the exact test (ascending sums, water-filling) every cell that test would cap,
including where its margin does not hold (src/trustscore/scoring/issuers.py)."""

from __future__ import annotations

import numpy as np
import pytest

from trustscore.scoring import issuers
from trustscore.scoring.issuers import issuer_cap_factors


def every_cell_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    """No cell trusted to the quick test: each goes through the exact one (the factors by definition)."""
    monkeypatch.setattr(issuers, "_NORMAL_FLOOR", np.inf)


def bits(x: np.ndarray) -> list[int]:
    return [int(b) for b in x.view(np.int64)]


def test_a_cap_at_subnormal_scale_is_not_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    """c·T a few subnormal steps: the 1e-6 margin rounds away, and the any-order first-party sum (one
    ulp above the ascending one) made the quick test skip a cap the exact test applies."""
    q, total, ulp = 2.0**-1074, 5 * 2.0**-1015, 2.0**-1065
    weight = np.array([total - ulp, 307 * q, 307 * q, 3 * q])
    cell, issuer = np.zeros(4, np.int64), np.array([-1, -1, -1, 0], np.int64)
    factors = issuer_cap_factors(cell, issuer, weight, 1, 2.0**-60)
    assert factors.tolist() == [1.0, 1.0, 1.0, 0.6666666666666666]
    every_cell_exact(monkeypatch)
    assert bits(factors) == bits(issuer_cap_factors(cell, issuer, weight, 1, 2.0**-60))


def test_a_cap_is_not_skipped_when_an_any_order_sum_overflows() -> None:
    """The issuer's weights overflow in row order, not in ascending order: inf > inf found no candidate."""
    top, ulp = np.finfo(np.float64).max, 2.0**971
    weight = np.array([top - ulp, 0.6 * ulp, 0.6 * ulp, 1.0])
    cell, issuer = np.zeros(4, np.int64), np.array([0, 0, 0, 1], np.int64)
    with np.errstate(over="ignore", invalid="ignore"):
        factors = issuer_cap_factors(cell, issuer, weight, 1, 0.5)
    assert factors.tolist() == [5.562684646268003e-309] * 3 + [1.0]


@pytest.mark.parametrize("seed", range(40))
def test_the_quick_test_changes_no_factor(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(seed)
    rows, cells = int(rng.integers(1, 3000)), int(rng.integers(1, 200))
    cell = rng.integers(0, cells, rows)
    issuer = np.where(rng.random(rows) < rng.random(), rng.integers(0, int(rng.integers(1, 50)), rows), -1)
    kind = seed % 5
    if kind == 0:  # decayed-like: a few binades
        weight = rng.random(rows) * 2.0 ** -rng.integers(0, 12, rows)
    elif kind == 1:  # huge ranges, up to an anchored model's 2^960
        weight = 2.0 ** rng.uniform(-1000, 960, rows)
    elif kind == 2:  # ties, zeros and -0.0
        weight = rng.choice([0.0, -0.0, 0.25, 0.5, 1.0], rows)
    elif kind == 3:  # one dominant issuer per cell
        weight = np.where(issuer == 0, 1e6, rng.random(rows))
    else:  # near the subnormal range
        weight = rng.integers(0, 1000, rows) * 2.0**-1074 + (rng.random(rows) < 0.1) * 2.0**-1020
    max_share = float(rng.choice([0.25, 0.5, 1.0, 2.0**-60, float(rng.random())]))
    quick = issuer_cap_factors(cell, issuer, weight, cells, max_share)
    every_cell_exact(monkeypatch)
    assert bits(quick) == bits(issuer_cap_factors(cell, issuer, weight, cells, max_share))
