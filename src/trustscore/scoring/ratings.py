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
from typing import TypeVar

import msgspec
import numpy as np
from numpy.typing import NDArray

from trustscore.errors import InvalidInput
from trustscore.scoring.engine import OK, REASONS, RatingColumns, score_columns
from trustscore.scoring.inputs import EvidenceBatch, EvidenceItem, Snapshot, SnapshotBatch
from trustscore.scoring.times import to_micros
from trustscore.scoring.weights import Weights

T = TypeVar("T")


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

    Column work is done once for all agents; the per-agent loop only assembles prepared pieces: each
    agent's ``null_reasons`` is a copy of the dict prepared for its pattern of nulls (:func:`_null_reasons`).
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
    scored = columns.scores.astype(object)  # Python floats
    scored[columns.reasons != OK] = None
    dimensions = row_dicts(names, scored.ravel().tolist())
    null_reasons = _null_reasons(columns, weights, has_total)
    uncertainties: Sequence[Uncertainty | None] = _uncertainties(columns, weights) or [None] * len(totals)
    model_version, digest = weights.model_version, weights.digest
    return [
        Rating(
            agent=agent,
            model_version=model_version,
            weights_digest=digest,
            total=total,
            adjusted=adjusted_,
            grade=grade,
            coverage=coverage,
            confidence=confidence_,
            n=n,
            dimensions=dims,
            null_reasons=reasons,
            uncertainty=uncertainty,
        )
        for agent, total, adjusted_, grade, coverage, confidence_, n, dims, reasons, uncertainty in zip(
            columns.agents,
            totals,
            adjusted,
            grades,
            columns.coverage.tolist(),
            confidence,
            columns.n.tolist(),
            dimensions,
            null_reasons,
            uncertainties,
            strict=True,
        )
    ]


#: Per code of the per-agent columns of :func:`_null_codes`, the null reasons it adds, in key order.
_TOTAL_REASONS: tuple[dict[str, str], ...] = (
    {},  # total and adjusted scored
    {"total": "no_scored_dimensions", "adjusted": "no_scored_dimensions", "grade": "no_scored_dimensions"},
    {"adjusted": "no_evidence"},  # a total without a freshness-adjusted one
)
_CONFIDENCE_REASONS: tuple[dict[str, str], ...] = ({}, {"confidence": "no_evidence"})
_TOTAL_INTERVAL_REASONS: tuple[dict[str, str], ...] = (
    {},
    {"uncertainty.total_interval": "snapshot_only"},  # a total from snapshots alone
    {"uncertainty.total_interval": "no_scored_dimensions"},
)


def _null_reasons(
    columns: RatingColumns, weights: Weights, has_total: NDArray[np.bool_]
) -> list[dict[str, str]]:
    """Each agent's ``null_reasons``: a copy of the dict built once for its pattern of nulls.

    Keys in order: dimensions, total/adjusted/grade, confidence, then (models with ``[uncertainty]``)
    dimension intervals and the total interval. An agent's pattern is its row of codes, one per column
    of that order (:func:`_null_codes`); agents with equal rows have equal dicts."""
    codes, tables = _null_codes(columns, weights, has_total)
    if codes.shape[0] == 0:
        return []
    patterns, which = _distinct_rows(codes)
    prepared = [
        {key: reason for table, code in zip(tables, row, strict=True) for key, reason in table[code].items()}
        for row in patterns.tolist()
    ]
    return [prepared[p].copy() for p in which.tolist()]


def _null_codes(
    columns: RatingColumns, weights: Weights, has_total: NDArray[np.bool_]
) -> tuple[NDArray[np.int8], list[tuple[dict[str, str], ...]]]:
    """Per agent, a row of small codes (A, C), and per column the null reasons each code adds."""
    names = weights.dimension_names
    total = np.where(has_total, np.where(np.isnan(columns.adjusted), 2, 0), 1)
    parts = [columns.reasons, total[:, None], np.isnan(columns.confidence)[:, None]]
    tables = [_reason_table(f"dimensions.{name}") for name in names] + [_TOTAL_REASONS, _CONFIDENCE_REASONS]
    if weights.spec.uncertainty is not None:
        total_interval = np.where(np.isnan(columns.total_low), np.where(has_total, 1, 2), 0)
        parts += [columns.interval_reasons, total_interval[:, None]]
        tables += [_reason_table(f"uncertainty.dimensions.{name}.interval") for name in names]
        tables.append(_TOTAL_INTERVAL_REASONS)
    return np.hstack(parts).astype(np.int8), tables


def _reason_table(key: str) -> tuple[dict[str, str], ...]:
    """Per engine reason code, the null reason it adds at ``key`` (none for OK)."""
    return tuple({} if code == OK else {key: reason} for code, reason in enumerate(REASONS))


def _distinct_rows(codes: NDArray[np.int8]) -> tuple[NDArray[np.int8], NDArray[np.intp]]:
    """The distinct rows of ``codes`` and, per row, the index of its own among them."""
    fits = codes.shape[1] * 3 <= 63 and codes.min(initial=0) >= 0 and codes.max(initial=0) < 8
    if fits:  # a row fits one int64 (3 bits a code, each 0..7: a negative code would borrow from the next)
        key = codes.astype(np.int64) @ (np.int64(1) << (3 * np.arange(codes.shape[1], dtype=np.int64)))
        _, first, which = np.unique(key, return_index=True, return_inverse=True)
        return codes[first], which.reshape(-1)
    patterns, which = np.unique(codes, axis=0, return_inverse=True)
    return patterns, which.reshape(-1)


def _uncertainties(columns: RatingColumns, weights: Weights) -> list[Uncertainty] | None:
    """Per agent, its ``uncertainty`` block; None for models without one (their null reasons are
    :func:`_null_reasons`')."""
    spec = weights.spec.uncertainty
    if spec is None:
        return None
    names = weights.dimension_names
    ok = columns.interval_reasons == OK
    # A dimension without items has the same (frozen) stats in every agent: one struct is shared, the
    # other cells are built. Only +0.0 is shared: -0.0 == 0.0 but is published as -0.0.
    empty = (columns.counts == 0) & (columns.n_eff == 0.0) & ~np.signbit(columns.n_eff) & ~ok
    stats = [DimensionStats(n=0, n_eff=0.0, interval=None)] * empty.size
    built = np.flatnonzero(~empty.ravel())  # indexes: gathers by a boolean mask are slower
    for cell, count, n_eff, low, high, has in zip(
        built.tolist(),
        columns.counts.ravel()[built].tolist(),
        columns.n_eff.ravel()[built].tolist(),
        columns.low.ravel()[built].tolist(),
        columns.high.ravel()[built].tolist(),
        ok.ravel()[built].tolist(),
        strict=True,
    ):
        stats[cell] = DimensionStats(n=count, n_eff=n_eff, interval=(low, high) if has else None)
    level = spec.interval_level
    return [
        Uncertainty(
            level=level,
            n_eff=n_eff_total,
            total_interval=None if math.isnan(low_total) else (int(low_total), int(high_total)),
            dimensions=dimensions,
        )
        for n_eff_total, low_total, high_total, dimensions in zip(
            columns.total_n_eff.tolist(),
            columns.total_low.tolist(),
            columns.total_high.tolist(),
            row_dicts(names, stats),
            strict=True,
        )
    ]


def row_dicts(keys: Sequence[str], cells: list[T]) -> list[dict[str, T]]:
    """``cells`` (rows of ``len(keys)`` values, one after another) as one dict per row.

    One flat list rather than a list per row: fewer objects for the cycle collector to track."""
    width = len(keys)
    if width == 0 or len(cells) % width:
        raise ValueError(f"{len(cells)} cells are not whole rows of {width} keys")
    # One iterator over the cells: zip takes a key first and stops when the keys run out, so each dict
    # takes the next row and no more (no slice per row, 1.7x faster).
    rest = iter(cells)
    return [dict(zip(keys, rest, strict=False)) for _ in range(len(cells) // width)]
