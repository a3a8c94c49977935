"""The worked examples of docs/methodology.md, number for number."""

from __future__ import annotations

import datetime as dt

import pytest

from trustscore.scoring import EvidenceItem, Rating, Snapshot, Weights, score_agent

from .conftest import AT

AGENT = "example-agent"


def on(day: str) -> dt.datetime:
    return dt.datetime.fromisoformat(f"2026-{day}T00:00:00+00:00")


def ev(**kw: object) -> EvidenceItem:
    return EvidenceItem(agent=AGENT, **kw)  # type: ignore[arg-type]


def sn(day: str, total: int, version: str) -> Snapshot:
    return Snapshot(agent=AGENT, at=on(day), total=total, model_version=version)


BASELINE_EVIDENCE = [
    ev(dimension="capability", source="real-benchmark", value=1.0, key="q1", at=on("11-28")),
    ev(dimension="capability", source="real-benchmark", value=0.6, key="q2", at=on("11-28")),
    ev(dimension="capability", source="real-benchmark", value=0.2, key="q2", at=on("11-20")),
    ev(dimension="capability", source="self-reported", value=1.0, at=on("11-25")),
    ev(dimension="delivery", source="arena", result="success", issuer="buyer-1", at=on("11-29")),
    ev(dimension="delivery", source="arena", result="partial", issuer="buyer-2", at=on("11-15")),
    ev(dimension="reliability", source="verified", value=0.9, at=on("11-27")),
    ev(dimension="security", source="benchmark", result="failure", at=on("11-10")),
]
BASELINE_SNAPSHOTS = [
    sn("10-01", 600, "baseline-v0.3"),
    sn("10-15", 630, "baseline-v0.3"),
    sn("11-01", 900, "baseline-v0.4"),
    sn("11-15", 900, "baseline-v0.4"),
]


def ago(days: int) -> dt.datetime:
    return AT - dt.timedelta(days=days)


MODEL_EVIDENCE = [
    ev(dimension="capability", source="real-benchmark", value=v, key=f"q{i}", at=ago(age))
    for i, (v, age) in enumerate([(1.0, 0), (1.0, 0), (1.0, 0), (0.5, 30), (0.0, 60)])
]
MODEL_EVIDENCE += [ev(dimension="delivery", source="arena", result="success", issuer="x", at=AT)] * 3
MODEL_EVIDENCE += [
    ev(dimension="delivery", source="arena", result=r, issuer=i, at=AT)
    for r, i in [("success", "y"), ("failure", "z"), ("partial", "w")]
]
MODEL_EVIDENCE += [ev(dimension="security", source="verified", value=1.0, at=ago(10))] * 3
MODEL_SNAPSHOTS = [sn("10-01", 600, "trustscore-v1"), sn("10-15", 630, "trustscore-v1")]


def test_baseline_worked_example(baseline: Weights) -> None:
    r = score_agent(AGENT, BASELINE_EVIDENCE, BASELINE_SNAPSHOTS, baseline, AT)
    assert r.n == 7
    assert r.dimensions["capability"] == 74.99999999999999  # 100 * 1.65 / 2.2 in float64
    assert r.dimensions["delivery"] == 75.0
    assert r.dimensions["security"] == 0.0
    assert r.dimensions["reliability"] == pytest.approx(0.5 * 90 + 0.5 * 100 * (1 - 0.025 / 0.15))
    assert r.coverage == pytest.approx(0.65)
    assert (r.total, r.adjusted, r.grade) == (360, 352, "B")
    assert r.confidence == pytest.approx(0.65 * (0.5 * 7 / 20 + 0.5 * 5.7 / 7))
    assert r.null_reasons == {
        f"dimensions.{d}": "no_evidence" for d in ("economic", "collaboration", "negotiation", "integrity")
    }


def _interval(r: Rating, name: str) -> tuple[float, float] | None:
    assert r.uncertainty is not None
    return r.uncertainty.dimensions[name].interval


def test_model_worked_example(model: Weights) -> None:
    r = score_agent(AGENT, MODEL_EVIDENCE, MODEL_SNAPSHOTS, model, AT)
    assert r.uncertainty is not None
    assert r.dimensions["capability"] == pytest.approx(74.6667, abs=1e-4)
    assert r.uncertainty.dimensions["capability"].n_eff == 3.75
    assert _interval(r, "capability") == pytest.approx((34.33, 94.32), abs=5e-3)
    assert r.dimensions["delivery"] == 62.5
    assert r.uncertainty.dimensions["delivery"].n_eff == pytest.approx(4.0)
    assert _interval(r, "delivery") == pytest.approx((26.29, 88.62), abs=5e-3)
    assert r.dimensions["security"] is None
    assert r.null_reasons["dimensions.security"] == "insufficient_evidence"
    assert r.uncertainty.dimensions["security"].n_eff == pytest.approx(2.143, abs=1e-3)
    assert r.dimensions["reliability"] == 50.0
    assert r.null_reasons["uncertainty.dimensions.reliability.interval"] == "snapshot_only"
    assert r.coverage == pytest.approx(0.55)
    assert (r.total, r.adjusted, r.grade) == (266, 266, "CCC")
    assert r.uncertainty.total_interval == (207, 325)
    assert r.uncertainty.n_eff == pytest.approx(7.75)
    assert r.n == 14
    assert r.confidence == pytest.approx(0.55 * (0.5 * 7.75 / 20 + 0.5 * 13.7 / 14))


def test_model_example_under_the_baseline(baseline: Weights) -> None:
    """What the doc says the baseline makes of the same agent."""
    snaps = [sn("10-01", 600, "baseline-v0.3"), sn("10-15", 630, "baseline-v0.3")]
    r = score_agent(AGENT, MODEL_EVIDENCE, snaps, baseline, AT)
    assert r.dimensions["capability"] == pytest.approx(61.0)
    assert r.dimensions["delivery"] == pytest.approx(75.0)
    assert r.dimensions["security"] == 100.0
    assert r.total == 358
