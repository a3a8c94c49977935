"""Ratings as plain msgspec structs, and the engine's public entry points.

A rating keeps baseline-v0.3's fields with their meaning unchanged and adds, beside them, the weights
digest, ``null_reasons`` and (for models with an ``[uncertainty]`` section) effective sample sizes and
intervals. Every null in a rating has an entry in ``null_reasons``, keyed by its JSON path.

The structs are ``gc=False``: they hold only numbers, strings and containers of them, so they cannot
form reference cycles, and a bulk recompute builds 10^5 of them without the cycle collector rescanning.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Collection, Sequence

import msgspec
import numpy as np
from numpy.typing import NDArray

from trustscore.errors import InvalidInput
from trustscore.scoring.engine import OK, REASONS, RatingColumns, score_columns
from trustscore.scoring.inputs import EvidenceBatch, EvidenceItem, Snapshot, SnapshotBatch
from trustscore.scoring.times import to_micros
from trustscore.scoring.weights import Weights


class DimensionStats(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """n counted items, n_eff the effective sample size, interval the two-sided interval on 0..100."""

    n: int
    n_eff: float
    interval: tuple[float, float] | None


class Uncertainty(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    level: float
    n_eff: float
    total_interval: tuple[int, int] | None
    dimensions: dict[str, DimensionStats]


class Rating(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True, gc=False):
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
    """Structs from the engine's columns (one per agent, in the columns' order).

    Column work is done once for all agents; the per-agent loop only assembles prepared pieces.
    ``null_reasons`` keeps its key order: dimensions, total/adjusted/grade, confidence, uncertainty.
    """
    names = weights.dimension_names
    grade_names = list(weights.spec.grades)
    thresholds = np.array(list(weights.spec.grades.values()), dtype=np.float64)
    has_total = ~np.isnan(columns.total)
    grade_index = np.argmax(np.where(has_total, columns.total, -1.0)[:, None] >= thresholds[None, :], axis=1)
    grades = [
        grade_names[g] if t else None for g, t in zip(grade_index.tolist(), has_total.tolist(), strict=True)
    ]
    totals = [None if math.isnan(t) else int(t) for t in columns.total.tolist()]
    adjusted = [None if math.isnan(a) else int(a) for a in columns.adjusted.tolist()]
    confidence = [None if math.isnan(c) else c for c in columns.confidence.tolist()]
    coverage, n = columns.coverage.tolist(), columns.n.tolist()
    scored = columns.scores.astype(object)  # Python floats
    scored[columns.reasons != OK] = None
    dimension_rows = scored.tolist()
    dim_reasons = _reason_pairs([f"dimensions.{name}" for name in names], columns.reasons)
    uncertainties = _uncertainties(columns, weights, has_total)
    model_version, digest = weights.model_version, weights.digest
    out: list[Rating] = []
    for i, agent in enumerate(columns.agents):
        null_reasons = dict(dim_reasons[i])
        if totals[i] is None:
            null_reasons.update(_NO_TOTAL)
        elif adjusted[i] is None:
            null_reasons["adjusted"] = "no_evidence"
        if confidence[i] is None:
            null_reasons["confidence"] = "no_evidence"
        uncertainty = None
        if uncertainties is not None:
            uncertainty, more_reasons = uncertainties[i]
            null_reasons.update(more_reasons)
        out.append(
            Rating(
                agent=agent,
                model_version=model_version,
                weights_digest=digest,
                total=totals[i],
                adjusted=adjusted[i],
                grade=grades[i],
                coverage=coverage[i],
                confidence=confidence[i],
                n=n[i],
                dimensions=dict(zip(names, dimension_rows[i], strict=True)),
                null_reasons=null_reasons,
                uncertainty=uncertainty,
            )
        )
    return out


_NO_TOTAL = {
    "total": "no_scored_dimensions",
    "adjusted": "no_scored_dimensions",
    "grade": "no_scored_dimensions",
}


def _reason_pairs(keys: list[str], reasons: NDArray[np.int8]) -> list[list[tuple[str, str]]]:
    """Per row, the (JSON path, reason) of each null entry in column order; rows with the same pattern
    of reasons share one list."""
    if reasons.shape[0] == 0:
        return []
    if len(keys) * 3 <= 63:  # reason codes fit in 3 bits: one int64 key per row
        code = reasons.astype(np.int64) @ (np.int64(1) << (3 * np.arange(len(keys), dtype=np.int64)))
        _, first, which = np.unique(code, return_index=True, return_inverse=True)
        patterns = reasons[first]
    else:
        patterns, which = np.unique(reasons, axis=0, return_inverse=True)
    shared = [[(keys[d], REASONS[r]) for d, r in enumerate(row) if r != OK] for row in patterns.tolist()]
    return [shared[p] for p in which.reshape(-1).tolist()]


def _uncertainties(
    columns: RatingColumns, weights: Weights, has_total: NDArray[np.bool_]
) -> list[tuple[Uncertainty, list[tuple[str, str]]]] | None:
    """Per agent, its ``uncertainty`` block and the null reasons it adds; None for models without one."""
    spec = weights.spec.uncertainty
    if spec is None:
        return None
    names = weights.dimension_names
    n_dims = len(names)
    stats = [
        DimensionStats(n=count, n_eff=n_eff, interval=(low, high) if ok else None)
        for count, n_eff, low, high, ok in zip(
            columns.counts.ravel().tolist(),
            columns.n_eff.ravel().tolist(),
            columns.low.ravel().tolist(),
            columns.high.ravel().tolist(),
            (columns.interval_reasons == OK).ravel().tolist(),
            strict=True,
        )
    ]
    keys = [f"uncertainty.dimensions.{name}.interval" for name in names]
    interval_reasons = _reason_pairs(keys, columns.interval_reasons)
    out = []
    rows = zip(
        columns.total_n_eff.tolist(),
        columns.total_low.tolist(),
        columns.total_high.tolist(),
        has_total.tolist(),
        strict=True,
    )
    for i, (n_eff_total, low_total, high_total, scored) in enumerate(rows):
        reasons = interval_reasons[i]
        total_interval = None
        if math.isnan(low_total):
            why = "snapshot_only" if scored else "no_scored_dimensions"
            reasons = [*reasons, ("uncertainty.total_interval", why)]
        else:
            total_interval = (int(low_total), int(high_total))
        uncertainty = Uncertainty(
            level=spec.interval_level,
            n_eff=n_eff_total,
            total_interval=total_interval,
            dimensions=dict(zip(names, stats[i * n_dims : (i + 1) * n_dims], strict=True)),
        )
        out.append((uncertainty, reasons))
    return out
