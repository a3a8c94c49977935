"""baseline-v0.3 read against the issue's spec, line by line: numbers computed by hand (or with exact
fractions), checked on the engine AND on the plain-Python reference.

The property tests compare the engine with the reference, so a misreading both share goes unseen
there; every case here states its expected value independently of either. See docs/methodology.md.
"""

from __future__ import annotations

import datetime as dt
from fractions import Fraction

import msgspec
import numpy as np
import pytest

from trustscore.scoring import EvidenceItem, Rating, Snapshot, Weights, score_agents
from trustscore.scoring.kernels import round_half_up
from trustscore.scoring.reference import RefEvidence, RefSnapshot, score_baseline
from trustscore.scoring.times import to_micros

from .conftest import AT, days_ago, item, snap

FIELDS = ("agent", "model_version", "total", "adjusted", "grade", "coverage", "confidence", "n", "dimensions")


def both(
    items: list[EvidenceItem], weights: Weights, snapshots: list[Snapshot] | None = None
) -> dict[str, Rating]:
    """Engine ratings, after checking that the reference rates every agent identically."""
    ratings = {r.agent: r for r in score_agents(items, snapshots, weights, AT)}
    ref_items = [
        RefEvidence(e.agent, e.dimension, e.source, e.value, e.result, e.key, to_micros(e.at), i)
        for i, e in enumerate(items)
    ]
    ref_snaps = [RefSnapshot(s.agent, to_micros(s.at), s.total, s.model_version) for s in snapshots or []]
    for agent, rating in ratings.items():
        expected = score_baseline(agent, ref_items, ref_snaps, weights, to_micros(AT))
        assert {f: msgspec.to_builtins(getattr(rating, f)) for f in FIELDS} == expected
    return ratings


# --- round_half_up: an exact .5 rounds up, also when float noise lands just below it -------------------


def test_total_exact_half_computed_below_half_rounds_up(baseline: Weights) -> None:
    # economic 70 (self-reported 0.2 x 0.7 / 0.2); coverage 0.1: 0.1 x 70 x 10 x 0.55 = 38.5 exactly.
    # In float64 the product is 38.49999999999999 and floor(x + 0.5) gave 38.
    r = both([item(dimension="economic", source="self-reported", value=0.7, at=AT)], baseline)["a"]
    assert r.total == 39
    assert r.adjusted == 39  # age 0: freshness 1


def test_total_exact_half_over_two_dimensions(baseline: Weights) -> None:
    # negotiation 20, economic 90 (verified); coverage 0.15, factor 0.575:
    # (0.05 x 20 + 0.1 x 90) x 10 x 0.575 = 10 x 5.75 = 57.5 -> 58 (float64 gave 57).
    items = [
        item(dimension="negotiation", source="verified", value=0.2),
        item(dimension="economic", source="verified", value=0.9),
    ]
    assert both(items, baseline)["a"].total == 58


def test_total_612_5_rounds_to_613(baseline: Weights) -> None:
    # Every dimension 61.25 (value 0.6125), coverage 1: 61.25 x 10 x 1 = 612.5 -> 613, not 612 (half even).
    r = both([item(dimension=d, value=0.6125) for d in baseline.dimension_names], baseline)["a"]
    assert r.total == 613 and r.grade == "A"


def _exact_total(rows: list[tuple[str, str, str]], weights: Weights) -> Fraction:
    """The total's formula in exact fractions of the decimals as written (no reliability snapshots)."""
    source_weight = {s: Fraction(repr(weights.source_weight(s))) for _, s, _ in rows}
    weighted, coverage = Fraction(0), Fraction(0)
    for name, w_d in weights.spec.dimensions.items():
        mine = [(Fraction(v), source_weight[s]) for d, s, v in rows if d == name]
        if mine:
            total_wv = sum((v * sw for v, sw in mine), Fraction(0))
            score = 100 * total_wv / sum((sw for _, sw in mine), Fraction(0))
            weighted += Fraction(repr(w_d)) * score
            coverage += Fraction(repr(w_d))
    return weighted * 10 * (Fraction(1, 2) + Fraction(1, 2) * coverage)


def test_total_exact_half_with_many_dimensions(baseline: Weights) -> None:
    rows = [
        ("capability", "arena", "0.8"),
        ("integrity", "real", "0.95"),
        ("economic", "simulation", "0.9"),
        ("security", "benchmark", "0.5"),
        ("security", "benchmark", "0.9"),
        ("collaboration", "self-reported", "0.9"),
        ("reliability", "benchmark", "0.95"),
        ("reliability", "verified", "0.95"),
    ]
    assert _exact_total(rows, baseline) == Fraction(1251, 2)  # 625.5; float64 gave 625.4999999999999
    items = [item(dimension=d, source=s, value=float(v)) for d, s, v in rows]
    assert both(items, baseline)["a"].total == 626


def test_round_half_up_kernel() -> None:
    x = np.array([612.5, 612.4999999999999, 612.499999998, 34.5, 38.50000000000001, 0.4, 999.5])
    assert round_half_up(x).tolist() == [613.0, 613.0, 612.0, 35.0, 39.0, 0.0, 1000.0]


# --- coverage: the sum of the weights as written, not of their binary approximations -----------------


def test_coverage_is_the_decimal_sum_of_the_weights(baseline: Weights) -> None:
    r = both(
        [
            item("a", dimension="capability"),
            item("a", dimension="economic"),  # 0.2 + 0.1: 0.30000000000000004 in float64
            item("b", dimension="capability"),
            item("b", dimension="delivery"),  # 0.2 + 0.15: 0.35000000000000003 in float64
            *[item("c", dimension=d) for d in baseline.dimension_names],
        ],
        baseline,
    )
    assert (r["a"].coverage, r["b"].coverage, r["c"].coverage) == (0.3, 0.35, 1.0)
    # a: 0.2 x 100 + 0.1 x 100 = 30; x 10 x 0.65 = 195.
    assert r["a"].total == 195


# --- dedupe by key --------------------------------------------------------------------------------


def test_dedupe_newest_by_time_not_by_line(baseline: Weights) -> None:
    # The later line is older: the earlier line, newer by `at`, counts.
    r = both([item(key="q", value=0.9, at=days_ago(1)), item(key="q", value=0.1, at=days_ago(3))], baseline)
    assert r["a"].n == 1 and r["a"].dimensions["capability"] == pytest.approx(90.0)


def test_dedupe_tie_on_time_later_line_wins(baseline: Weights) -> None:
    same = days_ago(2)
    items = [item(key="q", value=0.1, at=same), item(key="q", value=0.9, at=same), item(key="r", value=0.5)]
    r = both(items, baseline)["a"]
    assert r.n == 2 and r.dimensions["capability"] == pytest.approx(70.0)  # (0.9 + 0.5) / 2


def test_dedupe_key_spans_dimensions_and_sources(baseline: Weights) -> None:
    # Same agent, same key: one item counts, whatever its dimension or source.
    items = [
        item(key="q", dimension="capability", source="real", value=1.0, at=days_ago(5)),
        item(key="q", dimension="delivery", source="self-reported", value=0.4, at=days_ago(2)),
    ]
    r = both(items, baseline)["a"]
    assert r.n == 1 and r.dimensions["capability"] is None
    assert r.dimensions["delivery"] == pytest.approx(40.0)
    # n and mean(sw) see only the counted item: confidence = 0.15 x (0.5 x 1/20 + 0.5 x 0.2) = 0.01875.
    assert r.confidence == pytest.approx(0.01875)


def test_dedupe_only_among_rows_at_or_before_the_rating_time(baseline: Weights) -> None:
    # A re-submission after --at neither counts nor knocks out the earlier answer.
    r = both([item(key="q", value=0.3, at=days_ago(2)), item(key="q", value=1.0, at=days_ago(-1))], baseline)
    assert r["a"].n == 1 and r["a"].dimensions["capability"] == pytest.approx(30.0)


# --- item value -----------------------------------------------------------------------------------


def test_value_zero_is_a_value_not_a_missing_one(baseline: Weights) -> None:
    # value 0 with result success: the value is present, so v = 0 (no fallback to the result).
    r = both([item(value=0.0, result="success"), item("b", value=0.2, result="failure")], baseline)
    assert r["a"].dimensions["capability"] == 0.0
    assert r["b"].dimensions["capability"] == pytest.approx(20.0)


def test_clamp_then_cap_only_real_benchmark(baseline: Weights) -> None:
    r = both(
        [
            item("a", source="real-benchmark", value=1.7),  # clamp 1, cap 0.85
            item("b", source="real-benchmark", value=-0.4),  # clamp 0
            item("c", source="real-benchmark", result="partial"),  # 0.5, under the cap
            item("d", source="benchmark", value=1.3),  # clamp 1, no cap
            item("e", source="arena", value=0.95),  # no cap
        ],
        baseline,
    )
    assert [r[x].dimensions["capability"] for x in "abcde"] == pytest.approx([85.0, 0.0, 50.0, 100.0, 95.0])


# --- reliability ----------------------------------------------------------------------------------


def test_other_version_between_breaks_adjacency(baseline: Weights) -> None:
    # Adjacent means adjacent in the agent's full time-sorted snapshot list: v0.3 500, v0.2 100,
    # v0.3 530 has no pair (not 500 -> 530, which would give C = 60 and reliability min(60, 50) = 50).
    snaps = [snap(500, 3), snap(100, 2, "baseline-v0.2"), snap(530, 1)]
    r = both([], baseline, snaps)["a"]
    assert r.dimensions["reliability"] is None and r.total is None


def test_null_total_between_breaks_adjacency(baseline: Weights) -> None:
    r = both([], baseline, [snap(500, 3), snap(None, 2), snap(530, 1)])["a"]
    assert r.dimensions["reliability"] is None


def test_snapshots_at_the_same_time_sort_by_version_then_total(baseline: Weights) -> None:
    # Same time: baseline-v0.2 sorts before baseline-v0.3, so 500 (v0.3) -> 100 (v0.2) -> 530 (v0.3):
    # no pair. Totals of one version at one time sort ascending: 530 -> 560, drift 30/530.
    r = both([], baseline, [snap(500, 3), snap(530, 2), snap(100, 2, "baseline-v0.2")])["a"]
    assert r.dimensions["reliability"] is None
    r = both([item(dimension="reliability", value=0.0)], baseline, [snap(560, 2), snap(530, 2)])["a"]
    c = 100 * (1 - (30 / 530) / 0.15)  # 62.26 (560 -> 530 would be 64.29)
    assert r.dimensions["reliability"] == pytest.approx(0.5 * c)


def test_consistency_zero_is_a_score(baseline: Weights) -> None:
    # 100 -> 200: drift 1 >= 0.15, C = 0; only C: min(0, 50) = 0, which counts for coverage.
    r = both([], baseline, [snap(100, 2), snap(200, 1)])["a"]
    assert r.dimensions["reliability"] == 0.0 and r.coverage == 0.2 and r.total == 0 and r.grade == "C"
    # Drift denominator max(|t1|, 1): 0 -> 1 is drift 1, not a division by zero.
    r = both([item(dimension="reliability", value=0.8)], baseline, [snap(0, 2), snap(1, 1)])["a"]
    assert r.dimensions["reliability"] == pytest.approx(40.0)  # 0.5 x 80 + 0.5 x 0


def test_mean_drift_over_pairs(baseline: Weights) -> None:
    # 400 -> 430 (0.075), 430 -> 430 (0), then v0.2 200 -> 220 (0.1): mean 0.175 / 3; C = 61.11.
    snaps = [
        snap(400, 6),
        snap(430, 5),
        snap(430, 4),
        snap(200, 3, "baseline-v0.2"),
        snap(220, 2, "baseline-v0.2"),
    ]
    r = both([item(dimension="reliability", value=0.5)], baseline, snaps)["a"]
    c = 100 * (1 - (0.175 / 3) / 0.15)
    assert r.dimensions["reliability"] == pytest.approx(0.5 * 50 + 0.5 * c)


# --- freshness, n, confidence, the rating time ----------------------------------------------------


def test_freshness_uses_fractional_days(baseline: Weights) -> None:
    # capability 100 -> total 120; 36 hours: 120 x 0.5^(1.5/30) = 115.91 -> 116 (whole days would say 117).
    r = both([item(at=AT - dt.timedelta(hours=36))], baseline)["a"]
    assert r.total == 120 and r.adjusted == 116


def test_freshness_from_the_newest_counted_item(baseline: Weights) -> None:
    # The newest counted item is 30 days old: the row dated after --at does not count.
    items = [item(at=days_ago(30)), item(at=days_ago(45)), item(at=days_ago(-1))]
    r = both(items, baseline)["a"]
    assert r.n == 2 and r.total == 120 and r.adjusted == 60  # 120 x 0.5


def test_rows_exactly_at_the_rating_time_count(baseline: Weights) -> None:
    r = both([item(at=AT)], baseline, [snap(500, 1), snap(500, 0)])["a"]
    assert r.n == 1 and r.adjusted == r.total
    # The pair 500 -> 500 needs the snapshot dated exactly --at: C = 100, only C: min(100, 50).
    assert r.dimensions["reliability"] == 50.0


def test_confidence_counts_items_not_dimensions(baseline: Weights) -> None:
    # 25 items: n/20 saturates at 1; mean(sw) = (20 x 1.0 + 5 x 0.2) / 25 = 0.84; coverage 0.2 + 0.15.
    items = [item() for _ in range(20)] + [
        item(dimension="delivery", source="self-reported") for _ in range(5)
    ]
    r = both(items, baseline)["a"]
    assert r.n == 25
    assert r.confidence == pytest.approx(0.35 * (0.5 * 1.0 + 0.5 * 0.84))
