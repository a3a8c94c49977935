"""Ratings as plain msgspec structs, and the engine's public entry points.

A rating keeps baseline-v0.3's fields with their meaning unchanged and adds, beside them, the weights
digest, ``null_reasons`` and (for models with an ``[uncertainty]`` section) effective sample sizes and
intervals. Every null in a rating has an entry in ``null_reasons``, keyed by its JSON path.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Collection, Sequence

import msgspec
import numpy as np

from trustscore.errors import InvalidInput
from trustscore.scoring.engine import OK, REASONS, RatingColumns, score_columns
from trustscore.scoring.inputs import EvidenceBatch, EvidenceItem, Snapshot, SnapshotBatch
from trustscore.scoring.times import to_micros
from trustscore.scoring.weights import Weights


class DimensionStats(msgspec.Struct, frozen=True, kw_only=True):
    """n counted items, n_eff the effective sample size, interval the two-sided interval on 0..100."""

    n: int
    n_eff: float
    interval: tuple[float, float] | None


class Uncertainty(msgspec.Struct, frozen=True, kw_only=True):
    level: float
    n_eff: float
    total_interval: tuple[int, int] | None
    dimensions: dict[str, DimensionStats]


class Rating(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """One agent's rating under one model at one time."""

    agent: str
    model_version: str
    weights_digest: str
    total: int | None
    adjusted: int | None
    grade: str | None
    coverage: float
    confidence: float | None
    n: int
    dimensions: dict[str, float | None]
    null_reasons: dict[str, str]
    uncertainty: Uncertainty | None = None


def score_agents(
    evidence: EvidenceBatch | Sequence[EvidenceItem],
    snapshots: SnapshotBatch | Sequence[Snapshot] | None,
    weights: Weights,
    at: dt.datetime,
    agents: Collection[str] | None = None,
) -> list[Rating]:
    """Ratings at ``at`` of ``agents`` (default: every agent in the evidence or snapshots), sorted by id."""
    batch = evidence if isinstance(evidence, EvidenceBatch) else EvidenceBatch.from_items(evidence)
    if snapshots is None:
        snaps = SnapshotBatch.empty()
    else:
        snaps = snapshots if isinstance(snapshots, SnapshotBatch) else SnapshotBatch.from_items(snapshots)
    return to_ratings(score_columns(batch, snaps, weights, to_micros(at), agents), weights)


def score_agent(
    agent: str,
    evidence: EvidenceBatch | Sequence[EvidenceItem],
    snapshots: SnapshotBatch | Sequence[Snapshot] | None,
    weights: Weights,
    at: dt.datetime,
) -> Rating:
    """One agent's rating; rows of other agents in the input are ignored."""
    if not agent:
        raise InvalidInput("agent id must not be empty")
    (rating,) = score_agents(evidence, snapshots, weights, at, agents=(agent,))
    return rating


def to_ratings(columns: RatingColumns, weights: Weights) -> list[Rating]:
    """Structs from the engine's columns (one per agent, in the columns' order)."""
    names = weights.dimension_names
    dim_keys = [f"dimensions.{name}" for name in names]
    interval_keys = [f"uncertainty.dimensions.{name}.interval" for name in names]
    grade_names = list(weights.spec.grades)
    thresholds = np.array(list(weights.spec.grades.values()), dtype=np.float64)
    has_total_col = ~np.isnan(columns.total)
    grade_index = np.argmax(
        np.where(has_total_col, columns.total, -1.0)[:, None] >= thresholds[None, :], axis=1
    )
    uncertainty_spec = weights.spec.uncertainty
    scores, reasons = columns.scores.tolist(), columns.reasons.tolist()
    counts, n_eff = columns.counts.tolist(), columns.n_eff.tolist()
    low, high, interval_reasons = (
        columns.low.tolist(),
        columns.high.tolist(),
        columns.interval_reasons.tolist(),
    )
    total, adjusted = columns.total.tolist(), columns.adjusted.tolist()
    coverage, confidence, n = columns.coverage.tolist(), columns.confidence.tolist(), columns.n.tolist()
    total_n_eff, total_low, total_high = (
        columns.total_n_eff.tolist(),
        columns.total_low.tolist(),
        columns.total_high.tolist(),
    )
    grades = grade_index.tolist()
    out: list[Rating] = []
    for i, agent in enumerate(columns.agents):
        null_reasons: dict[str, str] = {}
        dimensions: dict[str, float | None] = {}
        for d, name in enumerate(names):
            if reasons[i][d] == OK:
                dimensions[name] = scores[i][d]
            else:
                dimensions[name] = None
                null_reasons[dim_keys[d]] = REASONS[reasons[i][d]]
        has_total = not math.isnan(total[i])
        if not has_total:
            for field in ("total", "adjusted", "grade"):
                null_reasons[field] = "no_scored_dimensions"
        elif math.isnan(adjusted[i]):
            null_reasons["adjusted"] = "no_evidence"
        if math.isnan(confidence[i]):
            null_reasons["confidence"] = "no_evidence"
        uncertainty = None
        if uncertainty_spec is not None:
            stats: dict[str, DimensionStats] = {}
            for d, name in enumerate(names):
                interval = None
                if interval_reasons[i][d] == OK:
                    interval = (low[i][d], high[i][d])
                else:
                    null_reasons[interval_keys[d]] = REASONS[interval_reasons[i][d]]
                stats[name] = DimensionStats(n=counts[i][d], n_eff=n_eff[i][d], interval=interval)
            total_interval = None
            if not math.isnan(total_low[i]):
                total_interval = (int(total_low[i]), int(total_high[i]))
            else:
                why = "snapshot_only" if has_total else "no_scored_dimensions"
                null_reasons["uncertainty.total_interval"] = why
            uncertainty = Uncertainty(
                level=uncertainty_spec.interval_level,
                n_eff=total_n_eff[i],
                total_interval=total_interval,
                dimensions=stats,
            )
        out.append(
            Rating(
                agent=agent,
                model_version=weights.model_version,
                weights_digest=weights.digest,
                total=int(total[i]) if has_total else None,
                adjusted=None if math.isnan(adjusted[i]) else int(adjusted[i]),
                grade=grade_names[grades[i]] if has_total else None,
                coverage=coverage[i],
                confidence=None if math.isnan(confidence[i]) else confidence[i],
                n=n[i],
                dimensions=dimensions,
                null_reasons=null_reasons,
                uncertainty=uncertainty,
            )
        )
    return out
