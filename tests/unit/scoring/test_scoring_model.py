"""trustscore-v1: per-item decay, effective sample sizes, Wilson intervals, suppression, issuer cap."""

from __future__ import annotations

import math

import pytest

from trustscore.scoring import Rating, Weights

from .conftest import AT, days_ago, item, rate, snap, variant

Z90 = 1.6448536269514722


def wilson(p: float, n: float, z: float = Z90) -> tuple[float, float]:
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return 100 * (centre - half), 100 * (centre + half)


def stats(r: Rating, name: str) -> tuple[int, float, tuple[float, float] | None]:
    assert r.uncertainty is not None
    s = r.uncertainty.dimensions[name]
    return s.n, s.n_eff, s.interval


def test_per_item_decay_halves_weight_every_30_days(open_model: Weights) -> None:
    # success today (weight 1) and failure 30 days old (weight 0.5): 100 * 1 / 1.5.
    r = rate([item(value=1.0, at=AT), item(value=0.0, at=days_ago(30))], open_model)["a"]
    assert r.dimensions["capability"] == pytest.approx(100 / 1.5)
    assert stats(r, "capability")[1] == pytest.approx(1.5)


def test_old_evidence_stops_drawing_credit(model: Weights) -> None:
    # Ten successes: fresh they stand (n_eff 10); after 90 days n_eff = 10 / 8 = 1.25 < 3: suppressed.
    fresh = rate([item(at=AT) for _ in range(10)], model)["a"]
    old = rate([item(at=days_ago(90)) for _ in range(10)], model)["a"]
    assert fresh.dimensions["capability"] == 100.0
    assert old.dimensions["capability"] is None
    assert old.null_reasons["dimensions.capability"] == "insufficient_evidence"
    assert stats(old, "capability")[1] == pytest.approx(1.25)
    assert old.total is None


def test_suppression_is_null_with_reason_never_a_low_number(model: Weights) -> None:
    r = rate([item(value=0.0, at=AT), item(value=0.0, at=AT)], model)["a"]  # n_eff 2 < 3
    assert r.dimensions["capability"] is None
    assert r.null_reasons["dimensions.capability"] == "insufficient_evidence"
    assert r.null_reasons["uncertainty.dimensions.capability.interval"] == "insufficient_evidence"
    assert stats(r, "capability") == (2, 2.0, None)


def test_wilson_interval_on_effective_sample_size(model: Weights) -> None:
    # 3 successes + 1 failure, fresh, no issuer: p = 0.75, n_eff = 4.
    r = rate([item(at=AT)] * 3 + [item(value=0.0, at=AT)], model)["a"]
    n, n_eff, interval = stats(r, "capability")
    assert (n, n_eff) == (4, 4.0)
    assert interval is not None
    assert interval == pytest.approx(wilson(0.75, 4.0))
    assert r.dimensions["capability"] == 75.0
    assert interval[0] < 75.0 < interval[1]


def test_interval_never_zero_width_at_the_edges(model: Weights) -> None:
    r = rate([item(at=AT) for _ in range(5)], model)["a"]
    _, _, interval = stats(r, "capability")
    assert interval is not None
    assert interval[1] == pytest.approx(100.0) and interval[0] == pytest.approx(wilson(1.0, 5.0)[0])
    assert interval[0] < 100.0


def test_total_interval_contains_total(model: Weights) -> None:
    items = [item(dimension=d, value=0.7, at=AT) for d in model.dimension_names for _ in range(6)]
    r = rate(items, model)["a"]
    assert r.uncertainty is not None and r.uncertainty.total_interval is not None and r.total is not None
    low, high = r.uncertainty.total_interval
    assert 0 <= low < r.total < high <= 1000
    assert r.uncertainty.n_eff == pytest.approx(48.0)
    assert r.uncertainty.level == 0.9


def test_single_issuer_cannot_carry_a_dimension(model: Weights) -> None:
    # 20 fresh deliveries all reported by one counterparty: capped to 0 weight -> insufficient evidence.
    r = rate([item(dimension="delivery", source="arena", issuer="x", at=AT) for _ in range(20)], model)["a"]
    assert r.dimensions["delivery"] is None
    assert r.null_reasons["dimensions.delivery"] == "insufficient_evidence"
    assert stats(r, "delivery")[:2] == (20, 0.0)


def test_ring_of_three_cannot_carry_but_four_equal_issuers_can(model: Weights) -> None:
    ring = [item(dimension="delivery", source="arena", issuer=i, at=AT) for i in "xyz" for _ in range(5)]
    four = [item(dimension="delivery", source="arena", issuer=i, at=AT) for i in "wxyz" for _ in range(5)]
    assert rate(ring, model)["a"].dimensions["delivery"] is None
    r = rate(four, model)["a"]
    assert r.dimensions["delivery"] == 100.0
    assert stats(r, "delivery")[1] == pytest.approx(20.0)  # equal shares of 0.25: nothing capped


def test_heavy_issuer_is_capped_to_the_share(open_model: Weights) -> None:
    # x reports 10 failures, y, z, w one success each: L solves L = 0.25 * (3 + L) -> L = 1.
    # Each issuer then weighs 1: delivery = 100 * 3 / 4 = 75 (uncapped it would be 100 * 3 / 13).
    items = [item(dimension="delivery", source="arena", issuer="x", value=0.0, at=AT) for _ in range(10)]
    items += [item(dimension="delivery", source="arena", issuer=i, at=AT) for i in "yzw"]
    r = rate(items, open_model)["a"]
    assert r.dimensions["delivery"] == pytest.approx(75.0)
    assert stats(r, "delivery")[1] == pytest.approx(4.0)


def test_first_party_evidence_is_exempt_and_counts_in_the_share(open_model: Weights) -> None:
    # 3 exam items (no issuer) + 1 from server-reverify (exempt) + 3 from counterparty x (value 0).
    # x's cap: L = 0.25 * (4 + L) -> L = 4/3, so x weighs 4/3 of its 3.
    items = [item(source="real-benchmark", value=0.8, at=AT) for _ in range(3)]
    items += [item(source="verified", issuer="server-reverify", value=1.0, at=AT)]
    items += [item(source="real", issuer="x", value=0.0, at=AT) for _ in range(3)]
    r = rate(items, open_model)["a"]
    exempt = 3 * 1.0 + 0.9
    capped = 0.25 * exempt / 0.75
    expected = 100 * (3 * 0.8 + 0.9 * 1.0) / (exempt + capped)
    assert r.dimensions["capability"] == pytest.approx(expected)
    assert stats(r, "capability")[1] == pytest.approx(exempt + capped)


def test_issuer_share_never_exceeds_cap_when_feasible(open_model: Weights) -> None:
    weights = {"p": 7, "q": 3, "r": 2, "s": 1, "t": 1}
    items = [item(issuer=i, source="real", at=AT) for i, k in weights.items() for _ in range(k)]
    items += [item(source="real", at=AT)]  # one first-party item
    r = rate(items, open_model)["a"]
    total = stats(r, "capability")[1]
    # Recompute the capped weights by hand: L = 0.25 * (1 + 1 + 1 + 2 + 2L) -> L = 2.5 ... q=3 capped too.
    level = 0.25 * (1 + 1 + 1 + 2) / (1 - 0.25 * 2)
    assert level == 2.5
    assert total == pytest.approx(1 + 1 + 1 + 2 + 2 * level)
    assert level / total <= 0.25 + 1e-12


def test_snapshot_only_reliability_has_no_interval(model: Weights) -> None:
    r = rate([], model, [snap(500, 3), snap(500, 2)])["a"]
    assert r.dimensions["reliability"] == 50.0
    assert r.null_reasons["uncertainty.dimensions.reliability.interval"] == "snapshot_only"
    assert r.uncertainty is not None and r.uncertainty.total_interval is None
    assert r.null_reasons["uncertainty.total_interval"] == "snapshot_only"


def test_reliability_blend_shifts_interval(open_model: Weights) -> None:
    items = [item(dimension="reliability", value=v, at=AT) for v in (1.0, 0.0, 1.0, 1.0)]
    r = rate(items, open_model, [snap(500, 3), snap(500, 2)])["a"]  # C = 100
    e_low, e_high = wilson(0.75, 4.0)
    assert r.dimensions["reliability"] == pytest.approx(0.5 * 75 + 0.5 * 100)
    assert stats(r, "reliability")[2] == pytest.approx((0.5 * e_low + 50, 0.5 * e_high + 50))


def test_extra_weight_multiplies_item_weight(open_model: Weights) -> None:
    items = [item(value=1.0, at=AT, extra_weight=0.25), item(value=0.0, at=AT)]
    r = rate(items, open_model)["a"]
    assert r.dimensions["capability"] == pytest.approx(20.0)
    assert stats(r, "capability")[1] == pytest.approx(1.25)


def test_model_reduces_to_baseline_without_its_additions(baseline: Weights) -> None:
    plain = variant(
        "test-plain",
        {
            "[decay]\nhalf_life_days = 30.0\n": "",
            '[issuers]\nmax_share = 0.25\nexempt = ["server-reverify"]\n': "",
            "min_effective_n = 3.0": "min_effective_n = 0.0",
        },
    )
    items = [
        item(value=0.3, at=days_ago(40), issuer="x"),
        item(dimension="delivery", source="arena", result="partial", at=days_ago(3)),
        item(dimension="security", source="verified", value=0.9, at=days_ago(12), key="k"),
    ]
    snaps = [snap(400, 5), snap(430, 4)]
    a, b = rate(items, baseline, snaps)["a"], rate(items, plain, snaps)["a"]
    assert (a.total, a.adjusted, a.dimensions, a.coverage, a.n) == (
        b.total,
        b.adjusted,
        b.dimensions,
        b.coverage,
        b.n,
    )
