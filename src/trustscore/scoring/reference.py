"""baseline-v0.3 in plain Python, one agent at a time: the executable form of the published rules.

It shares no code with the numpy engine (only the weights file and the arithmetic conventions of
``docs/methodology.md``: sums of ascending terms, exact decimal coverage, floor(x + 0.5 + 1e-9)), so
the tests and ``bench/scoring.py`` can check the engine against it bit for bit. It is slow on purpose:
clarity over speed.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction

from trustscore.scoring.times import MICROS_PER_DAY
from trustscore.scoring.weights import Weights

_OUTCOMES = ("failure", "partial", "success")


@dataclass(frozen=True)
class RefEvidence:
    agent: str
    dimension: str
    source: str
    value: float | None
    result: str | None
    key: str | None
    at: int  # microseconds since the epoch
    seq: int


@dataclass(frozen=True)
class RefSnapshot:
    agent: str
    at: int
    total: int | None
    model_version: str


def _ascending_sum(terms: Iterable[float]) -> float:
    acc = 0.0
    for term in sorted(terms):
        acc += term
    return acc


def _half_up(x: float) -> int:
    """Half up, with a value less than 1e-9 below a half-integer taken as that half-integer."""
    return math.floor(x + (0.5 + 1e-9))


def score_baseline(
    agent: str, evidence: list[RefEvidence], snapshots: list[RefSnapshot], weights: Weights, at: int
) -> dict[str, object]:
    """The baseline rating of ``agent`` as a plain dict with the output fields of the CLI."""
    spec = weights.spec
    mine = [e for e in evidence if e.agent == agent and e.at <= at]
    newest: dict[str, RefEvidence] = {}
    unkeyed: list[RefEvidence] = []
    for e in mine:
        if e.key is None:
            unkeyed.append(e)
        elif e.key not in newest or (e.at, e.seq) > (newest[e.key].at, newest[e.key].seq):
            newest[e.key] = e
    counted = unkeyed + list(newest.values())

    def item_value(e: RefEvidence) -> float:
        v = getattr(spec.outcomes, str(e.result)) if e.value is None else min(max(e.value, 0.0), 1.0)
        return min(v, weights.value_cap(e.source))

    dimensions: dict[str, float | None] = {}
    for name in weights.dimension_names:
        items = [e for e in counted if e.dimension == name]
        sw = [weights.source_weight(e.source) for e in items]
        total_w = _ascending_sum(sw)
        if not items or total_w <= 0.0:
            dimensions[name] = None
            continue
        total_wv = _ascending_sum(w * item_value(e) for w, e in zip(sw, items, strict=True))
        dimensions[name] = 100.0 * (total_wv / total_w)

    rel = spec.reliability
    e_score = dimensions[rel.dimension]
    c_score = _consistency(agent, snapshots, at, rel.drift_tolerance) if rel.use_snapshots else None
    if e_score is not None and c_score is not None:
        dimensions[rel.dimension] = rel.evidence_share * e_score + (1.0 - rel.evidence_share) * c_score
    elif c_score is not None:
        dimensions[rel.dimension] = min(c_score, rel.snapshot_only_cap)

    exact_coverage = Fraction(0)
    weighted = 0.0
    for name, w_d in spec.dimensions.items():
        score = dimensions[name]
        if score is not None:
            exact_coverage += Fraction(repr(w_d))  # the weight as written in the file
        weighted += w_d * (score if score is not None else 0.0)
    coverage = float(exact_coverage)
    total: int | None = None
    if any(s is not None for s in dimensions.values()):
        factor = spec.total.coverage_base + spec.total.coverage_slope * coverage
        total = _half_up(weighted * spec.total.scale * factor)

    n = len(counted)
    adjusted: int | None = None
    confidence: float | None = None
    if n > 0:
        if total is not None:
            days = (at - max(e.at for e in counted)) / MICROS_PER_DAY
            adjusted = _half_up(total * 0.5 ** (days / spec.freshness.half_life_days))
        mean_sw = _ascending_sum(weights.source_weight(e.source) for e in counted) / n
        share = spec.confidence.size_share
        size_term = min(1.0, n / spec.confidence.saturation_n)
        confidence = coverage * (share * size_term + (1.0 - share) * mean_sw)
    return {
        "agent": agent,
        "model_version": weights.model_version,
        "total": total,
        "adjusted": adjusted,
        "grade": None if total is None else weights.grade(total),
        "coverage": coverage,
        "confidence": confidence,
        "n": n,
        "dimensions": dimensions,
    }


def _consistency(agent: str, snapshots: list[RefSnapshot], at: int, tolerance: float) -> float | None:
    mine = sorted(
        (s for s in snapshots if s.agent == agent and s.at <= at),
        key=lambda s: (s.at, s.model_version, s.total is not None, s.total or 0),
    )
    drifts = [
        abs(b.total - a.total) / max(abs(a.total), 1)
        for a, b in itertools.pairwise(mine)
        if a.model_version == b.model_version and a.total is not None and b.total is not None
    ]
    if not drifts:
        return None
    mean = _ascending_sum(drifts) / len(drifts)
    return 100.0 * max(0.0, 1.0 - mean / tolerance)
