"""Monotonicity (issue #10): adding only failing evidence about an agent never raises its total, adding only
perfect evidence never lowers it — in trustscore-v2. trustscore-v1's coverage factor, suppression floor and
issuer cap each break this (pinned below), which is why v2 exists (docs/methodology.md, "trustscore-v2")."""

from __future__ import annotations

import datetime as dt

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trustscore.scoring import EvidenceItem, Snapshot, load_weights, score_agents

from .conftest import AT, WEIGHTS, item

V1 = load_weights(WEIGHTS / "trustscore-v1.toml")
V2 = load_weights(WEIGHTS / "trustscore-v2.toml")
DIMENSIONS = V2.dimension_names
SOURCES = ("real", "real-benchmark", "arena", "verified", "real-confidential", "self-reported", "gossip")

times = st.integers(min_value=0, max_value=120).map(lambda d: AT - dt.timedelta(days=d, hours=d % 7))
values = st.one_of(st.floats(0.0, 1.0), st.sampled_from([0.0, 0.5, 0.85, 1.0]))
base_items = st.builds(
    EvidenceItem,
    agent=st.just("a"),
    dimension=st.sampled_from(DIMENSIONS),
    source=st.sampled_from(SOURCES),
    at=times,
    value=values,
    result=st.sampled_from(["success", "partial", "failure"]),
    key=st.one_of(st.none(), st.sampled_from(["k1", "k2", "k3", "k4"])),
    issuer=st.one_of(st.none(), st.sampled_from(["x", "y", "z", "server-reverify"])),
    extra_weight=st.sampled_from([1.0, 0.5, 0.25, 0.0]),
)


def added(value: float, result: str) -> st.SearchStrategy[EvidenceItem]:
    """New evidence: a new key (or none), so it adds rather than corrects."""
    return st.builds(
        EvidenceItem,
        agent=st.just("a"),
        dimension=st.sampled_from(DIMENSIONS),
        source=st.sampled_from(SOURCES),
        at=times,
        value=st.just(value),
        result=st.just(result),
        key=st.one_of(st.none(), st.sampled_from(["new1", "new2", "new3"])),
        issuer=st.one_of(st.none(), st.sampled_from(["x", "y", "q", "server-reverify"])),
        extra_weight=st.sampled_from([1.0, 0.5, 0.1]),
    )


snapshots = st.lists(
    st.builds(
        Snapshot,
        agent=st.just("a"),
        at=times,
        total=st.one_of(st.none(), st.integers(0, 1000)),
        model_version=st.just("trustscore-v2"),
    ),
    max_size=4,
)
SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def total(items: list[EvidenceItem], snaps: list[Snapshot], weights: object = V2) -> int | None:
    [rating] = score_agents(items, snaps, weights, AT, agents=["a"])  # type: ignore[arg-type]
    return rating.total


@SETTINGS
@given(st.lists(base_items, max_size=25), snapshots, st.lists(added(0.0, "failure"), min_size=1, max_size=8))
def test_failing_evidence_never_raises_the_total(
    base: list[EvidenceItem], snaps: list[Snapshot], more: list[EvidenceItem]
) -> None:
    before, after = total(base, snaps), total(base + more, snaps)
    if before is not None and after is not None:
        assert after <= before


@SETTINGS
@given(st.lists(base_items, max_size=25), snapshots, st.lists(added(1.0, "success"), min_size=1, max_size=8))
def test_perfect_evidence_never_lowers_the_total(
    base: list[EvidenceItem], snaps: list[Snapshot], more: list[EvidenceItem]
) -> None:
    before, after = total(base, snaps), total(base + more, snaps)
    if before is not None:
        assert after is not None and after >= before


def test_v1_coverage_rewarded_failure_and_v2_does_not() -> None:
    """The attack: negative events in a new dimension raised a trustscore-v1 total (176 -> 338 observed)."""
    base = [item(dimension="capability", source="verified", key=f"c{i}", value=1.0) for i in range(4)]
    bad = [
        item(dimension="integrity", source="real", key=f"i{i}", value=0.0, issuer=f"m{i}") for i in range(6)
    ]
    v1_before, v1_after = total(base, [], V1), total(base + bad, [], V1)
    assert v1_before is not None and v1_after is not None and v1_after > v1_before
    v2_before, v2_after = total(base, []), total(base + bad, [])
    assert v2_before is not None and v2_after is not None and v2_after <= v2_before


def test_v1_suppression_floor_let_a_failure_raise_the_total_and_v2_does_not() -> None:
    base = [item(dimension="delivery", source="real", key=f"d{i}", value=1.0, at=AT) for i in range(2)]
    base += [item(dimension="capability", source="verified", key=f"c{i}", value=1.0) for i in range(4)]
    bad = [item(dimension="delivery", source="real", key="d-bad", value=0.0, at=AT)]
    v1_before, v1_after = total(base, [], V1), total(base + bad, [], V1)
    assert v1_before is not None and v1_after is not None and v1_after > v1_before
    v2_before, v2_after = total(base, []), total(base + bad, [])
    assert v2_before is not None and v2_after is not None and v2_after <= v2_before


def test_v2_public_exam_files_weigh_little() -> None:
    """Public exam answers can be looked up: in v2 a real-benchmark item weighs 0.1 (v1: 1.0)."""
    assert V2.source_weight("real-benchmark") == 0.1
    assert load_weights(WEIGHTS / "trustscore-v1.toml").source_weight("real-benchmark") == 1.0
