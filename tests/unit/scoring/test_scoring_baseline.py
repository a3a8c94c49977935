"""baseline-v0.3, rule by rule, against numbers computed by hand."""

from __future__ import annotations

import math

import pytest

from trustscore.scoring import Weights, score_agent

from .conftest import AT, days_ago, item, rate, snap

NULL_DIMENSIONS = ("economic", "collaboration", "security", "negotiation", "integrity")


def test_per_question_cap_on_real_benchmark(baseline: Weights) -> None:
    r = rate(
        [
            item("a", source="real-benchmark", value=1.0),
            item("b", source="real-benchmark", value=0.9),
            item("c", source="real-benchmark", value=0.5),
            item("d", source="real-benchmark", result="success"),
            item("e", source="benchmark", value=1.0),  # the cap is for public exam questions only
        ],
        baseline,
    )
    assert [r[x].dimensions["capability"] for x in "abcde"] == [85.0, 85.0, 50.0, 85.0, 100.0]


def test_values_are_clamped_and_results_mapped(baseline: Weights) -> None:
    r = rate(
        [
            item("a", value=1.7),
            item("b", value=-0.3),
            item("c", result="partial"),
            item("d", result="failure"),
            item("e", value=1),
        ],
        baseline,
    )
    assert [r[x].dimensions["capability"] for x in "abcde"] == [100.0, 0.0, 50.0, 0.0, 100.0]


def test_source_weights_and_default(baseline: Weights) -> None:
    # real 1.0 * 1 + self-reported 0.2 * 0 -> 100 * 1 / 1.2; an unknown source weighs 0.3.
    r = rate(
        [
            item("a", source="real", value=1.0),
            item("a", source="self-reported", value=0.0),
            item("b", source="real", value=0.0),
            item("b", source="tavern-gossip", value=1.0),
        ],
        baseline,
    )
    assert r["a"].dimensions["capability"] == pytest.approx(100 / 1.2)
    assert r["b"].dimensions["capability"] == pytest.approx(100 * 0.3 / 1.3)


def test_dedupe_by_key_newest_wins(baseline: Weights) -> None:
    r = rate(
        [
            item("a", key="q1", value=0.2, at=days_ago(3)),
            item("a", key="q1", value=0.6, at=days_ago(2)),  # newest of q1
            item("a", key="q1", value=0.4, at=days_ago(5)),
            item("a", key="q2", value=1.0),
            item("b", key="q1", value=0.0),  # keys are per agent
        ],
        baseline,
    )
    assert r["a"].n == 2
    assert r["a"].dimensions["capability"] == pytest.approx(80.0)
    assert r["b"].dimensions["capability"] == 0.0


def test_dedupe_tie_later_line_wins(baseline: Weights) -> None:
    same = days_ago(1)
    r = rate([item(key="q", value=0.2, at=same), item(key="q", value=0.7, at=same)], baseline)
    assert r["a"].n == 1
    assert r["a"].dimensions["capability"] == pytest.approx(70.0)


def test_dedupe_ignores_rows_after_the_rating_time(baseline: Weights) -> None:
    r = rate([item(key="q", value=0.3, at=days_ago(2)), item(key="q", value=0.9, at=days_ago(-1))], baseline)
    assert r["a"].dimensions["capability"] == pytest.approx(30.0)
    assert r["a"].n == 1


def test_evidence_after_at_does_not_count_but_agent_is_listed(baseline: Weights) -> None:
    r = rate([item("a"), item("z", at=days_ago(-1))], baseline)
    assert r["z"].n == 0 and r["z"].total is None and r["z"].confidence is None
    assert r["z"].null_reasons["total"] == "no_scored_dimensions"


def test_null_dimensions_coverage_and_total(baseline: Weights) -> None:
    # capability 80 (real, 0.8) and delivery 50 (arena, partial); coverage 0.35.
    r = rate([item(value=0.8), item(dimension="delivery", source="arena", result="partial")], baseline)["a"]
    for name in (*NULL_DIMENSIONS, "reliability"):
        assert r.dimensions[name] is None
        assert r.null_reasons[f"dimensions.{name}"] == "no_evidence"
    assert r.coverage == pytest.approx(0.35)
    # (0.2*80 + 0.15*50) * 10 * (0.5 + 0.5*0.35) = 23.5 * 6.75 = 158.625 -> 159
    assert r.total == 159
    assert r.grade == "C"


def test_total_null_when_every_dimension_null(baseline: Weights) -> None:
    r = score_agent("a", [item("b")], [], baseline, AT)
    assert r.total is None and r.adjusted is None and r.grade is None and r.confidence is None
    assert r.coverage == 0.0 and r.n == 0
    assert {r.null_reasons[k] for k in ("total", "adjusted", "grade")} == {"no_scored_dimensions"}
    assert r.null_reasons["confidence"] == "no_evidence"


def test_rounding_half_up_at_point_five(baseline: Weights) -> None:
    # delivery only, 40: 0.15 * 40 * 10 * (0.5 + 0.5 * 0.15) = 34.5 exactly in float64 -> 35 (not 34).
    r = rate([item(dimension="delivery", value=0.4, at=AT)], baseline)["a"]
    assert r.dimensions["delivery"] == 40.0
    assert r.total == 35
    assert r.adjusted == 35  # freshness 1 at age 0


def test_reliability_evidence_only(baseline: Weights) -> None:
    r = rate([item(dimension="reliability", value=0.6)], baseline)["a"]
    assert r.dimensions["reliability"] == pytest.approx(60.0)


def test_reliability_snapshots_only_capped_at_50(baseline: Weights) -> None:
    # pairs 500->520 (drift 0.04) and 520->520 (0): mean 0.02, C = 100 * (1 - 0.02/0.15) = 86.67 -> min(C, 50).
    steady = [snap(500, 3), snap(520, 2), snap(520, 1)]
    # 500 -> 560: drift 0.12, C = 20 -> stays 20.
    shaky = [snap(500, 3, agent="b"), snap(560, 2, agent="b")]
    r = rate([], baseline, steady + shaky)
    assert r["a"].dimensions["reliability"] == 50.0
    assert r["b"].dimensions["reliability"] == pytest.approx(20.0)
    # Only reliability: coverage 0.2, total = 0.2 * 50 * 10 * 0.6 = 60; no evidence: adjusted null.
    assert r["a"].total == 60 and r["a"].adjusted is None
    assert r["a"].null_reasons["adjusted"] == "no_evidence"


def test_reliability_blend(baseline: Weights) -> None:
    # E = 60; C from 500 -> 530: drift 0.06, C = 60; blend 0.5*60 + 0.5*60 = 60.
    # And with C = 100 (no drift): 0.5*60 + 0.5*100 = 80.
    r = rate(
        [item("a", dimension="reliability", value=0.6), item("b", dimension="reliability", value=0.6)],
        baseline,
        [snap(500, 3), snap(530, 2), snap(700, 3, agent="b"), snap(700, 2, agent="b")],
    )
    assert r["a"].dimensions["reliability"] == pytest.approx(60.0)
    assert r["b"].dimensions["reliability"] == pytest.approx(80.0)


def test_snapshot_pairs_across_model_versions_ignored(baseline: Weights) -> None:
    # Adjacent in time: v0.2 500 -> v0.3 900 (ignored: a calibration change), v0.3 900 -> v0.3 900 (drift 0).
    snaps = [snap(500, 4, "baseline-v0.2"), snap(900, 3), snap(900, 2)]
    r = rate([item(dimension="reliability", value=0.0)], baseline, snaps)["a"]
    assert r.dimensions["reliability"] == pytest.approx(50.0)  # 0.5 * 0 + 0.5 * 100


def test_snapshot_null_totals_and_lone_snapshots(baseline: Weights) -> None:
    # A null total breaks the pair on each side; a lone snapshot makes no pair: C is null.
    r = rate(
        [item(dimension="reliability", value=0.6)], baseline, [snap(500, 3), snap(None, 2), snap(800, 1)]
    )
    assert r["a"].dimensions["reliability"] == pytest.approx(60.0)
    r = rate([], baseline, [snap(500, 3)])
    assert r["a"].dimensions["reliability"] is None
    assert r["a"].null_reasons["dimensions.reliability"] == "no_evidence"


def test_snapshots_after_at_ignored(baseline: Weights) -> None:
    r = rate([item(dimension="reliability", value=0.6)], baseline, [snap(500, 3), snap(1000, -1)])
    assert r["a"].dimensions["reliability"] == pytest.approx(60.0)


def test_drift_denominator_is_at_least_one(baseline: Weights) -> None:
    # 0 -> 0.1? totals are integers: 0 -> 0 is drift 0, C = 100.
    r = rate([item(dimension="reliability", value=0.0)], baseline, [snap(0, 2), snap(0, 1)])
    assert r["a"].dimensions["reliability"] == 50.0


def test_freshness_adjusts_total(baseline: Weights) -> None:
    # One real success 30 days old: capability 100, total = 0.2*100*10*0.6 = 120, adjusted = 120 * 0.5.
    r = rate([item(at=days_ago(30))], baseline)["a"]
    assert r.total == 120
    assert r.adjusted == 60


def test_confidence(baseline: Weights) -> None:
    # 5 items: 4 real (1.0) + 1 self-reported (0.2); coverage 0.2.
    items = [item() for _ in range(4)] + [item(source="self-reported")]
    r = rate(items, baseline)["a"]
    mean_sw = (4 * 1.0 + 0.2) / 5
    assert r.confidence == pytest.approx(0.2 * (0.5 * 5 / 20 + 0.5 * mean_sw))
    many = rate([item() for _ in range(40)], baseline)["a"]
    assert many.confidence == pytest.approx(0.2 * (0.5 * 1.0 + 0.5 * 1.0))


@pytest.mark.parametrize(
    ("total", "grade"),
    [
        (1000, "AAA"),
        (800, "AAA"),
        (799, "AA"),
        (700, "AA"),
        (600, "A"),
        (500, "BBB"),
        (400, "BB"),
        (300, "B"),
        (200, "CCC"),
        (199, "C"),
        (0, "C"),
    ],
)
def test_grades(baseline: Weights, total: int, grade: str) -> None:
    assert baseline.grade(total) == grade


def test_full_coverage_perfect_agent_scores_1000(baseline: Weights) -> None:
    names = baseline.dimension_names
    r = rate([item(dimension=d) for d in names], baseline)["a"]
    assert r.coverage == pytest.approx(1.0)
    assert r.total == 1000 and r.grade == "AAA"
    assert r.adjusted == math.floor(1000 * 0.5 ** (1 / 30) + 0.5)


def test_rating_names_model_and_digest(baseline: Weights) -> None:
    r = rate([item()], baseline)["a"]
    assert r.model_version == "baseline-v0.3"
    assert r.weights_digest == baseline.digest
    assert r.uncertainty is None
