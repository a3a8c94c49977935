"""The scoring engine: a pure, vectorised function of evidence, snapshots, a weights file and a time.

No I/O and no hidden constants: every number comes from the :class:`~trustscore.scoring.weights.Weights`
(``docs/methodology.md`` states each formula). Per-agent results depend only on that agent's rows, and
every float reduction runs in a public order (:mod:`trustscore.scoring.kernels`), so the output is
bit-identical whatever the order of the input rows.
"""

from __future__ import annotations

import contextvars
import itertools
from collections.abc import Collection
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields, replace
from typing import Any

import numpy as np
from numpy.typing import NDArray

from trustscore.errors import ConfigError, InvalidInput
from trustscore.scoring.anchored import anchored_factors, decay_factor, exp2
from trustscore.scoring.inputs import EvidenceBatch, SnapshotBatch
from trustscore.scoring.issuers import issuer_cap_factors
from trustscore.scoring.kernels import (
    F64,
    I64,
    ascending_order,
    ascending_sums,
    decimal_sums,
    dense_codes,
    round_half_up,
    rounded_powers_of_half,
    sums_in_order,
    sums_near_order,
    table_order,
)
from trustscore.scoring.times import MICROS_PER_DAY
from trustscore.scoring.weights import Weights

# Reason codes for a null dimension (index into REASONS).
OK, NO_EVIDENCE, INSUFFICIENT, ZERO_WEIGHT, SNAPSHOT_ONLY = 0, 1, 2, 3, 4
REASONS = ("", "no_evidence", "insufficient_evidence", "zero_weight", "snapshot_only")


@dataclass(frozen=True)
class RatingColumns:
    """Every agent's rating as arrays (agents sorted by id); NaN is null. Shapes: (A,) and (A, D)."""

    agents: tuple[str, ...]
    scores: F64  # (A, D) on 0..100
    reasons: NDArray[np.int8]  # (A, D) why a score is null (OK where it is not)
    counts: I64  # (A, D) counted items
    n_eff: F64  # (A, D) effective sample size (uncertainty models)
    low: F64  # (A, D) interval, 0..100 (uncertainty models)
    high: F64
    interval_reasons: NDArray[np.int8]  # (A, D)
    coverage: F64
    total: F64
    adjusted: F64
    confidence: F64
    n: I64
    total_n_eff: F64
    total_low: F64
    total_high: F64


#: The fields of :class:`RatingColumns` with one entry (or row) per agent: all but ``agents``.
PER_AGENT_FIELDS = tuple(f.name for f in fields(RatingColumns) if f.name != "agents")


def score_columns(
    evidence: EvidenceBatch,
    snapshots: SnapshotBatch,
    weights: Weights,
    at: int,
    agents: Collection[str] | None = None,
    *,
    threads: int = 1,
) -> RatingColumns:
    """Rate ``agents`` (default: every agent in either batch) at ``at`` (microseconds since the epoch).

    With ``threads`` > 1 the agents (in id order) are cut into that many contiguous runs rated at once,
    each in a thread of its own, and the columns joined: an agent's rating reads only its own rows, so
    the result is the same to the bit, and numpy's sorts, gathers and passes let go of the GIL while
    they run (bench/scoring.py). If any run fails, the agents are rated again in one thread, which raises
    its own error (the one an input gives whatever the number of threads); the runs see the caller's
    numpy error settings (``np.errstate``, a context variable)."""
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise InvalidInput(f"threads must be a whole number >= 1, not {threads!r}")

    def rate(chosen: Collection[str] | None) -> RatingColumns:
        return rate_counted(counted_rows(evidence, snapshots, weights, at, chosen), weights, at)

    names = _agent_universe(evidence, snapshots, agents) if threads > 1 else ()
    if len(names) < 2:
        return rate(agents)
    threads = min(threads, len(names))
    bounds = [i * len(names) // threads for i in range(threads + 1)]
    try:
        with ThreadPoolExecutor(threads, thread_name_prefix="score") as pool:
            # A copy of the caller's context per run (one context cannot be entered by two threads).
            parts = [
                pool.submit(contextvars.copy_context().run, rate, names[low:high])
                for low, high in itertools.pairwise(bounds)
            ]
            return _joined([part.result() for part in parts])
    except Exception:  # the error of one thread, not of the run that failed first
        return rate(agents)


def _joined(parts: list[RatingColumns]) -> RatingColumns:
    """The columns of contiguous runs of agents, one after another."""
    columns: dict[str, Any] = {
        name: np.concatenate([getattr(p, name) for p in parts]) for name in PER_AGENT_FIELDS
    }
    return RatingColumns(agents=tuple(itertools.chain.from_iterable(p.agents for p in parts)), **columns)


@dataclass(frozen=True)
class CountedRows:
    """The rows that count at a rating time, with everything about them that does not read the time
    (values, source weights, snapshot consistency): the same for every time at which the same rows and
    snapshots count, so :func:`rate_counted` can rate them again at another such time."""

    names: tuple[str, ...]
    agent: I64
    cell: I64  # agent * dimensions + dimension
    when: I64
    value: F64
    source_weight: F64
    sw_order: I64  # table_order(source, source_table)
    extra_weight: F64
    issuer: I64 | None  # capped issuer codes (-1 exempt), for models with [issuers]
    consistency: F64  # snapshot consistency C per agent (NaN: none, or the model reads no snapshots)


def counted_rows(
    evidence: EvidenceBatch,
    snapshots: SnapshotBatch,
    weights: Weights,
    at: int,
    agents: Collection[str] | None = None,
) -> CountedRows:
    """The rows of ``agents`` that count at ``at``, prepared for :func:`rate_counted`."""
    evidence.check()
    snapshots.check()
    spec = weights.spec
    names = _agent_universe(evidence, snapshots, agents)
    n_dims = len(weights.dimension_names)

    # Rows that count: requested agents, at <= the rating time, newest per (agent, key).
    codes = _rank_codes(evidence.agents, names)
    if evidence.agent.dtype == np.int64 and np.array_equal(codes, np.arange(len(evidence.agents))):
        # The batch's own table: codes as they are.
        agent, keep = evidence.agent, evidence.at <= at
    else:
        agent = codes[evidence.agent]
        keep = (agent >= 0) & (evidence.at <= at)
    keep &= _newest_per_key(agent, evidence.key, evidence.at, evidence.seq, keep)
    rows = np.flatnonzero(keep)
    agent = agent[rows]
    dim = evidence.dimension[rows]
    dimension_index = _dimension_index(evidence, weights)
    if dim.dtype != np.int64 or not np.array_equal(dimension_index, np.arange(len(evidence.dimensions))):
        dim = dimension_index[dim]
    source = evidence.source[rows]

    # Item value (in place on the gathered copy: clipped, then a result's outcome where there is no
    # value) and source weight.
    outcome = np.array([spec.outcomes.failure, spec.outcomes.partial, spec.outcomes.success])
    value = evidence.value[rows].astype(np.float64, copy=False)
    np.clip(value, 0.0, 1.0, out=value)  # NaN stays NaN
    no_value = np.flatnonzero(np.isnan(value))
    value[no_value] = outcome[evidence.result[rows[no_value]]]
    caps = np.array([weights.value_cap(s) for s in evidence.sources])
    if caps.size and not caps.min() >= 1.0:  # every value and outcome is in [0, 1]: a cap of 1 changes none
        np.minimum(value, caps[source], out=value)
    source_table = np.array([weights.source_weight(s) for s in evidence.sources], dtype=np.float64)
    issuer = None
    if spec.issuers is not None:
        issuer = _capped_issuer_codes(evidence, spec.issuers.exempt)[evidence.issuer[rows]]
    cell = agent * n_dims
    cell += dim
    rel = spec.reliability
    return CountedRows(
        names=names,
        agent=agent,
        cell=cell,
        when=evidence.at[rows],
        value=value,
        source_weight=source_table[source],
        sw_order=table_order(source, source_table),
        extra_weight=evidence.extra_weight[rows],
        issuer=issuer,
        consistency=(
            snapshot_consistency(snapshots, names, at, rel.drift_tolerance)
            if rel.use_snapshots
            else np.full(len(names), np.nan)
        ),
    )


def rate_counted(
    counted: CountedRows, weights: Weights, at: int, orders: dict[str, I64] | None = None
) -> RatingColumns:
    """Ratings at ``at`` from the rows that count then (:func:`counted_rows` at a time with the same
    rows and snapshots): the engine's formulas, every one that reads the rating time included.

    ``orders``, if given, keeps the orders that sorted each cell's weights and w·v at an earlier call
    with the same ``counted`` (filled in at the first). Decay multiplies an agent's weights by one factor,
    so the order mostly holds at another time: only cells where rounding reorders terms are re-sorted
    (:func:`~trustscore.scoring.kernels.sums_near_order`), the sums are the same to the last bit. A model
    with an anchored decay needs no orders: its sums do not read the time (:func:`anchored_sums`)."""
    if weights.decay_anchor is not None:
        return rate_sums(anchored_sums(counted, weights), weights, at)
    spec = weights.spec
    cell, source_weight = counted.cell, counted.source_weight
    n_agents, n_dims = len(counted.names), len(weights.dimension_names)
    cells = n_agents * n_dims

    # Item weight, sw · 2^(-age / half-life) · extra · issuer cap, each product in place once the
    # weight is an array of its own (never the counted rows' source weights).
    weight = source_weight
    if spec.decay is not None:
        exponent = (at - counted.when) / MICROS_PER_DAY
        exponent /= spec.decay.half_life_days
        np.negative(exponent, out=exponent)
        # 0.5^y as 2^-y by the portable exp2: numpy's pow differs in the last bit between machines
        # (its AVX-512 path), which made the released numbers depend on the CPU (methodology.md).
        weight = exp2(exponent)
        weight *= source_weight
    weight = _times_extra(weight, counted.extra_weight, fresh=weight is not source_weight)
    if spec.issuers is not None:
        assert counted.issuer is not None
        factors = issuer_cap_factors(cell, counted.issuer, weight, cells, spec.issuers.max_share)
        if weight is source_weight:
            weight = weight * factors
        else:
            weight *= factors

    # Every sum in ascending order of its terms (kernels.py); one order of a column serves all its sums.
    sum_sw = None
    if np.array_equal(weight, source_weight):  # baseline: the item weight is the source weight
        sum_w, sum_sw = _source_weight_sums(counted, n_dims)
    else:
        sum_w = _cell_sums(cell, weight, cells, orders, "w")
    sum_wv = _cell_sums(cell, weight * counted.value, cells, orders, "wv")
    return _rate(_sums(counted, sum_w, sum_wv, n_dims, sum_sw), weights, at)


def _times_extra(weight: F64, extra: F64, *, fresh: bool) -> F64:
    """``weight · extra``: in place if ``weight`` is ``fresh`` (an array of the caller's own); ``weight``
    itself when every extra weight is 1 (x · 1 is x, to the bit)."""
    if extra.size and float(extra.min()) == 1.0 and float(extra.max()) == 1.0:
        return weight
    if fresh:
        weight *= extra
        return weight
    return weight * extra


def _source_weight_sums(counted: CountedRows, n_dims: int) -> tuple[F64, F64]:
    """Σ source weight per cell and per agent, both ascending (:func:`sums_in_order` in ``sw_order``),
    from one gather of the terms and the cells (an agent is its cells' ``cell // n_dims``)."""
    n_agents = len(counted.names)
    if counted.cell.size == 0:
        return np.zeros(n_agents * n_dims), np.zeros(n_agents)
    terms = counted.source_weight[counted.sw_order] + 0.0  # + 0.0 turns -0.0 into 0.0
    cell = counted.cell[counted.sw_order]
    per_cell = np.bincount(cell, weights=terms, minlength=n_agents * n_dims)
    cell //= n_dims
    per_agent = np.bincount(cell, weights=terms, minlength=n_agents)
    return per_cell.astype(np.float64, copy=False), per_agent.astype(np.float64, copy=False)


@dataclass(frozen=True)
class CellSums:
    """What the formulas read of an agent's counted rows: per cell (agent, dimension) Σw, Σ(w·v) and the
    item count; per agent n, the newest item time, Σ source weight and snapshot consistency. Shapes (A, D)
    and (A,). For a model with an anchored decay, Σw and Σ(w·v) are of the anchored weights and do not read
    the rating time (:func:`anchored_sums`), so they can be kept (:mod:`trustscore.scoring.refresh`)."""

    names: tuple[str, ...]
    sum_w: F64
    sum_wv: F64
    counts: I64
    n: I64
    newest: I64  # int64 min where n == 0
    sum_sw: F64
    consistency: F64


def anchored_sums(counted: CountedRows, weights: Weights) -> CellSums:
    """A model with an anchored decay: the cell sums of its time-independent item weights
    ``w = sw · 2^x · extra`` (× the issuer cap computed from those), x the item's half-lives after the
    anchor (:mod:`trustscore.scoring.anchored`); raises InvalidInput for an item outside the range."""
    spec = weights.spec
    cell = counted.cell
    cells = len(counted.names) * len(weights.dimension_names)
    weight = anchored_factors(counted.when, *_anchor(weights))
    weight *= counted.source_weight
    weight = _times_extra(weight, counted.extra_weight, fresh=True)
    if spec.issuers is not None:
        assert counted.issuer is not None
        weight *= issuer_cap_factors(cell, counted.issuer, weight, cells, spec.issuers.max_share)
    sum_w = ascending_sums(cell, weight, cells)
    sum_wv = ascending_sums(cell, weight * counted.value, cells)
    return _sums(counted, sum_w, sum_wv, len(weights.dimension_names))


def rate_sums(sums: CellSums, weights: Weights, at: int) -> RatingColumns:
    """A model with an anchored decay: ratings at ``at`` from its kept sums, the decayed sums being
    ``D(at) · Σw`` and ``D(at) · Σ(w·v)`` (one multiplication per cell); O(agents × dimensions)."""
    d = decay_factor(at, *_anchor(weights))
    return _rate(replace(sums, sum_w=d * sums.sum_w, sum_wv=d * sums.sum_wv), weights, at)


def _anchor(weights: Weights) -> tuple[int, float]:
    """The decay anchor and half-life of a model with an anchored decay."""
    anchor = weights.decay_anchor
    if anchor is None or weights.spec.decay is None:
        raise ConfigError(f"{weights.model_version} has no anchored decay")
    return anchor, weights.spec.decay.half_life_days


def _sums(counted: CountedRows, sum_w: F64, sum_wv: F64, n_dims: int, sum_sw: F64 | None = None) -> CellSums:
    """The cell sums with the per-agent columns; ``sum_sw`` if already taken (:func:`_source_weight_sums`)."""
    n_agents = len(counted.names)
    agent = counted.agent
    newest = np.full(n_agents, np.iinfo(np.int64).min)
    np.maximum.at(newest, agent, counted.when)
    counts = np.bincount(counted.cell, minlength=n_agents * n_dims).astype(np.int64).reshape(n_agents, n_dims)
    return CellSums(
        names=counted.names,
        sum_w=sum_w.reshape(n_agents, n_dims),
        sum_wv=sum_wv.reshape(n_agents, n_dims),
        counts=counts,
        n=counts.sum(axis=1),  # an agent's rows are its cells' rows
        newest=newest,
        sum_sw=(
            sums_in_order(agent, counted.source_weight, n_agents, counted.sw_order)
            if sum_sw is None
            else sum_sw
        ),
        consistency=counted.consistency,
    )


def _rate(sums: CellSums, weights: Weights, at: int) -> RatingColumns:
    """Every formula from the decayed cell sums on: scores, shrinkage, intervals, the reliability
    blend, coverage, total, freshness and confidence. O(agents × dimensions)."""
    spec = weights.spec
    names = sums.names
    n_agents, n_dims = len(names), len(weights.dimension_names)
    cells = n_agents * n_dims
    sum_w, sum_wv, counts = sums.sum_w.reshape(cells), sums.sum_wv.reshape(cells), sums.counts.reshape(cells)

    # Dimension scores.
    has_weight = sum_w > 0.0
    # trustscore-v2 pads thin evidence with failing weight up to the prior weight (monotone totals).
    trials = sum_w if spec.shrinkage is None else np.maximum(sum_w, spec.shrinkage.prior_weight)
    mean = np.where(has_weight, sum_wv / np.where(has_weight, trials, 1.0), np.nan)
    scores = 100.0 * mean
    reasons = np.where(counts == 0, NO_EVIDENCE, np.where(has_weight, OK, ZERO_WEIGHT)).astype(np.int8)
    n_eff: F64 = np.full(cells, np.nan)
    low: F64 = np.full(cells, np.nan)
    high: F64 = np.full(cells, np.nan)
    if spec.uncertainty is not None:
        n_eff = sum_w
        thin = (counts > 0) & (sum_w < spec.uncertainty.min_effective_n)
        reasons[thin] = INSUFFICIENT
        low, high = wilson_interval(mean, trials, weights.z)
    scores = np.where(reasons == OK, scores, np.nan).reshape(n_agents, n_dims)
    reasons = reasons.reshape(n_agents, n_dims)
    interval_reasons = reasons.copy()
    n_eff, low, high = (a.reshape(n_agents, n_dims) for a in (n_eff, low, high))
    low = np.where(reasons == OK, 100.0 * low, np.nan)
    high = np.where(reasons == OK, 100.0 * high, np.nan)

    _blend_reliability(scores, reasons, low, high, interval_reasons, sums.consistency, weights)

    # Agent-level figures.
    n = sums.n
    dim_weights = weights.dimension_weights
    coverage = decimal_sums(~np.isnan(scores), dim_weights)
    weighted = np.zeros(n_agents)
    for d, w_d in enumerate(dim_weights):  # file order, left to right
        weighted = weighted + w_d * np.where(np.isnan(scores[:, d]), 0.0, scores[:, d])
    factor = spec.total.coverage_base + spec.total.coverage_slope * coverage
    raw_total = weighted * spec.total.scale * factor
    any_score = ~np.isnan(scores).all(axis=1)
    total = np.where(any_score, round_half_up(raw_total), np.nan)

    adjusted = freshness_adjusted(total, sums.newest, n, at, weights)

    total_n_eff = np.full(n_agents, np.nan)
    total_low = np.full(n_agents, np.nan)
    total_high = np.full(n_agents, np.nan)
    size = n.astype(np.float64)
    if spec.uncertainty is not None:
        total_n_eff = np.zeros(n_agents)
        for d in range(n_dims):  # the evidence each scored dimension stands on, file order
            total_n_eff = total_n_eff + np.where(interval_reasons[:, d] == OK, n_eff[:, d], 0.0)
        size = total_n_eff
        with_interval = any_score & (total_n_eff > 0.0)  # not from snapshot consistency alone
        total_low, total_high = _total_interval(scores, low, high, weights, factor, raw_total, with_interval)
    mean_sw = sums.sum_sw / np.maximum(n, 1)
    share = spec.confidence.size_share
    size_term = np.minimum(1.0, size / spec.confidence.saturation_n)
    confidence = np.where(n > 0, coverage * (share * size_term + (1.0 - share) * mean_sw), np.nan)

    return RatingColumns(
        agents=names,
        scores=scores,
        reasons=reasons,
        counts=counts.reshape(n_agents, n_dims),
        n_eff=n_eff,
        low=low,
        high=high,
        interval_reasons=interval_reasons,
        coverage=coverage,
        total=total,
        adjusted=adjusted,
        confidence=confidence,
        n=n,
        total_n_eff=total_n_eff,
        total_low=total_low,
        total_high=total_high,
    )


def _cell_sums(cell: I64, x: F64, cells: int, orders: dict[str, I64] | None, name: str) -> F64:
    """Ascending per-cell sums of ``x``, from the kept order ``orders[name]`` where there is one."""
    if orders is None:
        return ascending_sums(cell, x, cells)
    if name in orders:
        return sums_near_order(cell, x, cells, orders[name])
    orders[name] = ascending_order(cell, x)
    return sums_in_order(cell, x, cells, orders[name])


def freshness_adjusted(total: F64, newest: I64, n: I64, at: int, weights: Weights) -> F64:
    """adjusted = round_half_up(total · 0.5^(days since the newest counted item / half-life)); NaN where
    the total is null or nothing counts. The only output of a model without decay that moves with the
    rating time while the counted rows stay the same (:mod:`trustscore.scoring.refresh`)."""
    adjusted = np.full(total.shape, np.nan)
    rows = np.flatnonzero(~np.isnan(total) & (n > 0))
    days = (at - newest[rows]) / MICROS_PER_DAY
    # The C library's pow, as the reference's ``**``, whatever numpy's vector width.
    y = days / weights.spec.freshness.half_life_days
    adjusted[rows] = rounded_powers_of_half(y, total[rows], round_half_up)
    return adjusted


def wilson_interval(p: F64, n: F64, z: float) -> tuple[F64, F64]:
    """Wilson score interval for a proportion ``p`` on ``n`` (effective) trials; NaN where n <= 0."""
    safe_n = np.where(n > 0.0, n, 1.0)
    safe_p = np.where(np.isnan(p), 0.0, p)
    z2 = z * z
    denom = 1.0 + z2 / safe_n
    centre = (safe_p + z2 / (2.0 * safe_n)) / denom
    half = z * np.sqrt(safe_p * (1.0 - safe_p) / safe_n + z2 / (4.0 * safe_n * safe_n)) / denom
    valid = (n > 0.0) & ~np.isnan(p)
    low = np.where(valid, np.clip(centre - half, 0.0, 1.0), np.nan)
    high = np.where(valid, np.clip(centre + half, 0.0, 1.0), np.nan)
    return np.minimum(low, safe_p), np.maximum(high, np.where(valid, safe_p, np.nan))


def _total_interval(
    scores: F64, low: F64, high: F64, weights: Weights, factor: F64, raw_total: F64, valid: NDArray[np.bool_]
) -> tuple[F64, F64]:
    """total ± z·se, with se from the dimensions' interval half-widths (independent, normal approx)."""
    z = weights.z
    variance = np.zeros(scores.shape[0])
    for d, w_d in enumerate(weights.dimension_weights):
        se = np.where(np.isnan(low[:, d]), 0.0, (high[:, d] - low[:, d]) / (2.0 * z))
        variance = variance + (w_d * se) * (w_d * se)
    se_total = weights.spec.total.scale * factor * np.sqrt(variance)
    top = weights.spec.total.scale * 100.0
    total_low = np.clip(round_half_up(raw_total - z * se_total), 0.0, top)
    total_high = np.clip(round_half_up(raw_total + z * se_total), 0.0, top)
    return np.where(valid, total_low, np.nan), np.where(valid, total_high, np.nan)


def _blend_reliability(
    scores: F64,
    reasons: NDArray[np.int8],
    low: F64,
    high: F64,
    interval_reasons: NDArray[np.int8],
    consistency: F64,
    weights: Weights,
) -> None:
    """Blend the reliability evidence score E with snapshot consistency C, in place."""
    rel = weights.spec.reliability
    d = weights.reliability_index
    e, c = scores[:, d].copy(), consistency
    has_e, has_c = ~np.isnan(e), ~np.isnan(c)
    a = rel.evidence_share
    both = has_e & has_c
    only_c = ~has_e & has_c
    floor = np.minimum(c, rel.snapshot_only_cap)
    blend = a * e + (1.0 - a) * c
    blend_low = a * low[:, d] + (1.0 - a) * c
    blend_high = a * high[:, d] + (1.0 - a) * c
    if weights.spec.shrinkage is not None:  # evidence never takes reliability below snapshots alone
        blend, blend_low, blend_high = (np.maximum(x, floor) for x in (blend, blend_low, blend_high))
    scores[:, d] = np.where(both, blend, np.where(only_c, floor, e))
    low[:, d] = np.where(both, blend_low, low[:, d])
    high[:, d] = np.where(both, blend_high, high[:, d])
    reasons[:, d] = np.where(only_c, OK, reasons[:, d])
    interval_reasons[:, d] = np.where(only_c, SNAPSHOT_ONLY, interval_reasons[:, d])


def snapshot_consistency(snapshots: SnapshotBatch, names: tuple[str, ...], at: int, tolerance: float) -> F64:
    """C per agent: 100 * max(0, 1 - mean(drift) / tolerance) over adjacent same-version pairs; NaN if none."""
    result = np.full(len(names), np.nan)
    agent = _rank_codes(snapshots.agents, names)[snapshots.agent]
    rows = np.flatnonzero((agent >= 0) & (snapshots.at <= at))
    if rows.size < 2:
        return result
    version_rank = _rank_codes(snapshots.model_versions, tuple(sorted(set(snapshots.model_versions))))
    agent, when = agent[rows], snapshots.at[rows]
    version = version_rank[snapshots.model_version[rows]]
    total, has_total = snapshots.total[rows], snapshots.has_total[rows]
    agent, version, total, has_total = _snapshot_order(agent, when, version, total, has_total)
    pair = (agent[1:] == agent[:-1]) & (version[1:] == version[:-1]) & has_total[1:] & has_total[:-1]
    t1, t2 = total[:-1][pair].astype(np.float64), total[1:][pair].astype(np.float64)
    drift = np.abs(t2 - t1) / np.maximum(np.abs(t1), 1.0)
    owner = agent[:-1][pair]
    pairs = np.bincount(owner, minlength=len(names))
    mean_drift = ascending_sums(owner, drift, len(names)) / np.maximum(pairs, 1)
    consistency = 100.0 * np.maximum(0.0, 1.0 - mean_drift / tolerance)
    return np.where(pairs > 0, consistency, result)


def _snapshot_order(
    agent: I64, when: I64, version: I64, total: I64, has_total: NDArray[np.bool_]
) -> tuple[I64, I64, I64, NDArray[np.bool_]]:
    """``agent``, ``version``, ``total`` and ``has_total`` in the order of (agent, when, version,
    has_total, total): a total order on the fields consistency reads (rows equal in all of them are
    interchangeable). One ``sort`` of the five packed in an int64, time and total each as its rank among
    the distinct values, where they fit (up to about 2^20 snapshots and agents); else ``lexsort``."""
    times, when_rank = np.unique(when, return_inverse=True)
    totals, total_rank = np.unique(total, return_inverse=True)
    bits = [max(1, int(c.max(initial=0)).bit_length()) for c in (agent, version)]
    a_bits, v_bits = bits
    w_bits, t_bits = (max(1, (c.size - 1).bit_length()) for c in (times, totals))
    if a_bits + w_bits + v_bits + 1 + t_bits > 63:
        order = np.lexsort((total, has_total, version, when, agent))
        return agent[order], version[order], total[order], has_total[order]
    packed = agent << (w_bits + v_bits + 1 + t_bits)
    packed |= when_rank.astype(np.int64, copy=False) << (v_bits + 1 + t_bits)
    packed |= version << (1 + t_bits)
    packed |= has_total.astype(np.int64) << t_bits
    packed |= total_rank.astype(np.int64, copy=False)
    packed.sort()
    return (
        packed >> (w_bits + v_bits + 1 + t_bits),
        (packed >> (1 + t_bits)) & ((1 << v_bits) - 1),
        totals[packed & ((1 << t_bits) - 1)],
        ((packed >> t_bits) & 1).astype(np.bool_),
    )


def _agent_universe(
    evidence: EvidenceBatch, snapshots: SnapshotBatch, agents: Collection[str] | None
) -> tuple[str, ...]:
    if agents is not None:
        return tuple(sorted(set(agents)))
    if evidence.agents == snapshots.agents and _ascending(evidence.agents):  # one table, already sorted
        return tuple(evidence.agents)
    return tuple(sorted(set(evidence.agents) | set(snapshots.agents)))


def _ascending(names: tuple[str, ...]) -> bool:
    """Strictly ascending: sorted and without repeats (what ``tuple(sorted(set(names)))`` would give)."""
    return all(a < b for a, b in itertools.pairwise(names))


def _rank_codes(table: tuple[str, ...], names: tuple[str, ...]) -> I64:
    """For each entry of ``table``, its index in ``names`` (sorted, no repeats); -1 where absent."""
    if table == names:
        return np.arange(len(names), dtype=np.int64)
    index = {name: i for i, name in enumerate(names)}
    return np.array([index.get(name, -1) for name in table], dtype=np.int64)


def _dimension_index(evidence: EvidenceBatch, weights: Weights) -> I64:
    known = {name: i for i, name in enumerate(weights.dimension_names)}
    unknown = [name for name in evidence.dimensions if name not in known]
    if unknown:
        raise InvalidInput(f"dimension {unknown[0]!r} is not in {weights.model_version}")
    return np.array([known[name] for name in evidence.dimensions], dtype=np.int64)


def _capped_issuer_codes(evidence: EvidenceBatch, exempt: list[str]) -> I64:
    """Issuer codes with exempt issuers mapped to -1 (like evidence without an issuer); -1 stays -1."""
    codes = np.array([-1 if name in exempt else i for i, name in enumerate(evidence.issuers)], dtype=np.int64)
    return np.concatenate((codes, [-1]))  # index -1 (no issuer) reads the appended -1


def _newest_per_key(agent: I64, key: I64, at: I64, seq: I64, keep: NDArray[np.bool_]) -> NDArray[np.bool_]:
    """Mask: False for keyed rows that a newer row (later ``at``, then later ``seq``) of the same agent and
    key supersedes. Only rows already in ``keep`` compete."""
    out = np.ones(agent.size, dtype=np.bool_)
    rows = np.flatnonzero(keep & (key >= 0))
    if rows.size == 0:
        return out
    row_key, group = key[rows], agent[rows]
    if (int(group.max()) + 1) * (int(row_key.max()) + 1) > np.iinfo(np.int64).max:
        row_key = dense_codes(row_key)[0]  # key codes so large that (agent, key) would wrap around in int64
    group *= int(row_key.max()) + 1
    group += row_key
    groups = int(group.max()) + 1
    if groups > max(4 * rows.size, 1 << 20):  # sparse (agent, key) space: number the pairs densely
        group, distinct = dense_codes(group)
        groups = distinct.size
    row_at = at[rows]
    newest = np.full(groups, np.iinfo(np.int64).min)
    np.maximum.at(newest, group, row_at)
    winner = row_at == newest[group]  # the newest time; then the highest seq among those
    # Every (agent, key) with a row has a row at its newest time, so as many rows at their key's newest
    # time as keys with a newest time above the fill value means one each: no tie for seq to break.
    occupied = np.count_nonzero(newest != np.iinfo(np.int64).min)
    if np.count_nonzero(winner) != occupied:
        newest_rows = np.flatnonzero(winner)
        newest_group, newest_seq = group[newest_rows], seq[rows[newest_rows]]
        last_seq = np.full(groups, np.iinfo(np.int64).min)
        np.maximum.at(last_seq, newest_group, newest_seq)
        winner[newest_rows] = newest_seq == last_seq[newest_group]
        # Still more winners than keys: two rows tie on seq too, or rows at INT64_MIN (the fill value)
        # left their keys out of the count.
        if np.count_nonzero(winner) != occupied and (
            row_at.min() != np.iinfo(np.int64).min or (np.bincount(group[winner], minlength=groups) > 1).any()
        ):
            raise InvalidInput("two evidence rows share agent, key, time and seq; seq must break ties")
    out[rows[np.flatnonzero(~winner)]] = False  # indexes: faster than a boolean mask of random rows
    return out
