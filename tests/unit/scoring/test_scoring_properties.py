"""Invariants of the engine: input order, isolation between agents, bounds, null reasons, the oracle."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any

import msgspec
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trustscore.scoring import (
    EvidenceBatch,
    EvidenceItem,
    Snapshot,
    SnapshotBatch,
    load_weights,
    score_agents,
)
from trustscore.scoring.reference import RefEvidence, RefSnapshot, score_baseline
from trustscore.scoring.times import to_micros

from .conftest import AT, WEIGHTS

BASELINE = load_weights(WEIGHTS / "baseline-v0.3.toml")
MODEL = load_weights(WEIGHTS / "trustscore-v1.toml")
DIMENSIONS = BASELINE.dimension_names
SOURCES = ("real", "real-benchmark", "arena", "verified", "self-reported", "gossip")
AGENTS = ("a", "b", "c")

times = st.integers(min_value=-2, max_value=90).map(lambda d: AT - dt.timedelta(days=d))
evidence_items = st.builds(
    EvidenceItem,
    agent=st.sampled_from(AGENTS),
    dimension=st.sampled_from(DIMENSIONS),
    source=st.sampled_from(SOURCES),
    at=times,
    value=st.one_of(st.none(), st.floats(-0.5, 1.5), st.sampled_from([0.0, 0.1, 0.85, 1.0])),
    result=st.sampled_from(["success", "partial", "failure"]),
    key=st.one_of(st.none(), st.sampled_from(["q1", "q2", "q3"])),
    issuer=st.one_of(st.none(), st.sampled_from(["x", "y", "z", "w", "server-reverify"])),
    extra_weight=st.sampled_from([1.0, 1.0, 0.5, 0.0]),
)
snapshots = st.builds(
    Snapshot,
    agent=st.sampled_from(AGENTS),
    at=times,
    total=st.one_of(st.none(), st.integers(0, 1000)),
    model_version=st.sampled_from(["baseline-v0.2", "baseline-v0.3"]),
)
evidence_lists = st.lists(evidence_items, max_size=40)
snapshot_lists = st.lists(snapshots, max_size=12)
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def encode_all(items: list[EvidenceItem], seqs: list[int], snaps: list[Snapshot], weights: Any) -> bytes:
    batch = EvidenceBatch.from_items(items, seq=seqs)
    return msgspec.json.encode(score_agents(batch, SnapshotBatch.from_items(snaps), weights, AT))


@SETTINGS
@given(evidence_lists, snapshot_lists, st.randoms(use_true_random=False))
def test_input_order_never_changes_output(
    items: list[EvidenceItem], snaps: list[Snapshot], rnd: random.Random
) -> None:
    seqs = list(range(len(items)))  # the sequence (line / log index) travels with its row
    rows = list(zip(items, seqs, strict=True))
    rnd.shuffle(rows)
    shuffled_snaps = list(snaps)
    rnd.shuffle(shuffled_snaps)
    for weights in (BASELINE, MODEL):
        first = encode_all(items, seqs, snaps, weights)
        second = encode_all([r[0] for r in rows], [r[1] for r in rows], shuffled_snaps, weights)
        assert first == second


@SETTINGS
@given(evidence_lists, snapshot_lists, evidence_lists)
def test_adding_evidence_for_one_agent_never_changes_another(
    items: list[EvidenceItem], snaps: list[Snapshot], extra: list[EvidenceItem]
) -> None:
    others = [msgspec.structs.replace(e, agent="b") for e in extra]
    for weights in (BASELINE, MODEL):
        before = {r.agent: r for r in score_agents(items, snaps, weights, AT)}
        after = {r.agent: r for r in score_agents(items + others, snaps, weights, AT)}
        for agent in ("a", "c"):
            if agent in before:
                assert msgspec.json.encode(before[agent]) == msgspec.json.encode(after[agent])


def _nulls(value: Any, path: str = "") -> list[str]:
    if value is None:
        return [path]
    if isinstance(value, dict):
        return [
            p
            for k, v in value.items()
            if k != "null_reasons"
            for p in _nulls(v, f"{path}.{k}" if path else k)
        ]
    return []


@SETTINGS
@given(evidence_lists, snapshot_lists)
def test_bounds_and_every_null_has_a_reason(items: list[EvidenceItem], snaps: list[Snapshot]) -> None:
    for weights in (BASELINE, MODEL):
        for r in score_agents(items, snaps, weights, AT):
            assert r.total is None or 0 <= r.total <= 1000
            assert r.adjusted is None or (r.total is not None and 0 <= r.adjusted <= r.total)
            assert 0.0 <= r.coverage <= 1.0 + 1e-12
            assert r.confidence is None or 0.0 <= r.confidence <= 1.0 + 1e-12
            for score in r.dimensions.values():
                assert score is None or 0.0 <= score <= 100.0
            plain = msgspec.to_builtins(r)
            assert sorted(_nulls(plain)) == sorted(r.null_reasons)
            if r.uncertainty is not None:
                for name, s in r.uncertainty.dimensions.items():
                    score = r.dimensions[name]
                    if s.interval is not None and score is not None:
                        assert 0.0 <= s.interval[0] <= score + 1e-9 <= s.interval[1] + 2e-9 <= 100.0 + 3e-9
                if r.uncertainty.total_interval is not None:
                    low, high = r.uncertainty.total_interval
                    assert r.total is not None and 0 <= low <= r.total <= high <= 1000


@SETTINGS
@given(evidence_lists, snapshot_lists)
def test_engine_equals_plain_python_baseline(items: list[EvidenceItem], snaps: list[Snapshot]) -> None:
    ref_items = [
        RefEvidence(
            agent=e.agent,
            dimension=e.dimension,
            source=e.source,
            value=e.value,
            result=e.result,
            key=e.key,
            at=to_micros(e.at),
            seq=i,
        )
        for i, e in enumerate(items)
    ]
    ref_snaps = [RefSnapshot(s.agent, to_micros(s.at), s.total, s.model_version) for s in snaps]
    # The oracle knows nothing of extra_weight (baseline inputs never carry one).
    plain = [msgspec.structs.replace(e, extra_weight=1.0) for e in items]
    at = to_micros(AT)
    fields = (
        "agent",
        "model_version",
        "total",
        "adjusted",
        "grade",
        "coverage",
        "confidence",
        "n",
        "dimensions",
    )
    for r in score_agents(plain, snaps, BASELINE, AT):
        expected = score_baseline(r.agent, ref_items, ref_snaps, BASELINE, at)
        assert {f: msgspec.to_builtins(getattr(r, f)) for f in fields} == expected
