"""Ratings kept current: move every agent's rating to a new time without a pass over its evidence.

A rating at time t depends on t in two ways: through *which* rows count (evidence and snapshots with
``at`` <= t) and, for the counted rows, through the formulas. :class:`RatingState` keeps, per agent, the
engine's columns at the last time it computed them and the window ``[valid_from, valid_until)`` of times
over which the same rows count. Within the window:

* a model **without** ``[decay]`` (baseline-v0.3) changes only ``adjusted`` (the freshness factor on the
  total). The state recomputes it from the cached total, newest item time and n with the engine's own
  function (:func:`~trustscore.scoring.engine.freshness_adjusted`), so the result is the full recompute
  bit for bit, in O(agents) whatever the number of items;
* a model with an **anchored** ``[decay]`` (trustscore-v3) defines its decayed sums as ``D(at) · S``, S the
  ascending-order cell sums of time-independent weights (:mod:`trustscore.scoring.anchored`). The state
  keeps, per agent, S_w and S_wv per dimension, the counts and the per-agent figures that do not read the
  time (:class:`~trustscore.scoring.engine.CellSums`), and rates them with the engine's own function
  (:func:`~trustscore.scoring.engine.rate_sums`): bit for bit the full recompute, in O(agents ×
  dimensions) whatever the number of items;
* a model **with** an unanchored ``[decay]`` (trustscore-v1, trustscore-v2) multiplies each item's weight by
  ``0.5^(age/half_life)`` computed per item, and the released arithmetic takes its sums over those
  rounded products. Mathematically the common factor cancels in the scores, but in float64
  ``pow(0.5, a + b)`` is not ``pow(0.5, a) · pow(0.5, b)``, and n_eff, suppression, intervals, shrinkage
  and confidence depend on the absolute weights: no cached statistic reproduces the released numbers
  bit for bit. Such a model's time formulas run over every counted row at each refresh (O(items), the
  limit stated in ``docs/methodology.md``); the state keeps every agent's counted rows
  (:class:`~trustscore.scoring.engine.CountedRows`) and the orders of their sums. An agent out of its
  window, or updated, has its rows read again and spliced into the kept ones (:func:`_spliced`: the
  other agents' rows are not read); while every agent stays in its window a refresh selects nothing and
  sorts only where rounding reordered terms.

Outside its window an agent is recomputed from its rows (an item became due, or time went back). Rows
come from the caller (``rows_of``): the state does no I/O and keeps no log (only, for a decay model, the
columns derived from the counted rows). An arrival is
:meth:`RatingState.update` with the agent's rows, O(that agent's items): ascending-order sums put a new
item among the old ones, so an agent's sums are retaken whole (an anchored model's included: its S is an
ascending-order sum too).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import fields

import numpy as np
from numpy.typing import NDArray

from trustscore.scoring.engine import (
    PER_AGENT_FIELDS,
    CellSums,
    CountedRows,
    RatingColumns,
    anchored_sums,
    counted_rows,
    freshness_adjusted,
    rate_counted,
    rate_sums,
    score_columns,
)
from trustscore.scoring.inputs import EvidenceBatch, EvidenceBuilder, SnapshotBatch
from trustscore.scoring.kernels import I64, table_order
from trustscore.scoring.medals import MedalRules, real_items
from trustscore.scoring.weights import Weights

#: The rows (evidence, snapshots) of the agents named, each agent with all of its rows.
RowsOf = Callable[[tuple[str, ...]], tuple[EvidenceBatch, SnapshotBatch]]

_NEVER = np.iinfo(np.int64).max  # no row becomes due
_ALWAYS = np.iinfo(np.int64).min  # no row counts yet
_SUMS = tuple(f.name for f in fields(CellSums) if f.name != "names")  # what an anchored model keeps
_MEDAL_COUNTS = ("medal_real_n", "medal_newest")  # medals.real_items, kept when the state has medal rules


class RatingState:
    """Every agent's rating under one model, refreshable to any time; see the module docstring."""

    def __init__(self, weights: Weights, medals: MedalRules | None = None) -> None:
        """With ``medals`` (the model's medals file), the state also keeps each agent's real item counts
        and newest real item times (:meth:`medal_counts`), which change only when its rows are re-read."""
        self.weights = weights
        self.medals = medals
        self._anchored = weights.decay_anchor is not None
        self._fields = (_SUMS if self._anchored else PER_AGENT_FIELDS) + (_MEDAL_COUNTS if medals else ())
        self._names: list[str] = []
        self._slot: dict[str, int] = {}
        self._columns: dict[str, np.ndarray] = {}  # field -> (slots, ...) as in RatingColumns or CellSums
        self._newest = np.zeros(0, dtype=np.int64)  # newest counted item time (meaningless where n == 0)
        self._valid_from = np.zeros(0, dtype=np.int64)
        self._valid_until = np.zeros(0, dtype=np.int64)
        self._agents: tuple[str, ...] | None = None  # the names when slots are in name order
        self._counted: CountedRows | None = None  # every agent's counted rows (models with decay)
        self._orders: dict[str, I64] = {}  # orders of their weights' sums (engine.rate_counted)

    def __len__(self) -> int:
        return len(self._names)

    def update(
        self,
        evidence: EvidenceBatch,
        snapshots: SnapshotBatch,
        at: int,
        agents: Collection[str] | None = None,
    ) -> None:
        """Rate ``agents`` (default: every agent in the batches) at ``at`` from all of their rows
        (an anchored model: their sums, which do not read ``at`` beyond which rows count)."""
        values: RatingColumns | CellSums
        counted = counted_rows(evidence, snapshots, self.weights, at, agents)
        if self._anchored:
            values = anchored_sums(counted, self.weights)
            names = values.names
        else:
            values = rate_counted(counted, self.weights, at)  # score_columns, keeping the counted rows
            names = values.agents
        self._store(
            names, self._arrays(values, evidence, names, at), _windows(evidence, snapshots, names, at)
        )
        if self._counted is not None:  # a decay model's kept rows: these agents' replaced, not all re-read
            self._counted = _spliced(self._counted, counted, len(self.weights.dimension_names))
            self._orders = {}

    def _arrays(
        self,
        values: RatingColumns | CellSums | None,
        evidence: EvidenceBatch | None,
        names: tuple[str, ...],
        at: int,
    ) -> dict[str, np.ndarray]:
        """The kept fields of ``names`` by name: ``values``' (None: none) and, with medal rules and the
        agents' ``evidence`` (None: their rows were not re-read), their medal counts."""
        out = {}
        if values is not None:
            out = {name: getattr(values, name) for name in self._fields if name not in _MEDAL_COUNTS}
        if self.medals is not None and evidence is not None:
            out["medal_real_n"], out["medal_newest"] = real_items(evidence, names, self.medals, at)
        return out

    def _store(
        self, names: tuple[str, ...], arrays: dict[str, np.ndarray], windows: tuple[I64, I64, I64]
    ) -> None:
        if not names:
            return  # nobody: and a state that never stored an agent has no columns to index yet
        slots = self._slots_of(names, arrays)
        for name, values in arrays.items():
            self._columns[name][slots] = values
        self._newest[slots], self._valid_from[slots], self._valid_until[slots] = windows

    def medal_counts(self) -> tuple[I64, I64]:
        """Per agent (in the order of the last :meth:`refresh`) and medal dimension: the real item counts
        and newest real item times that hold at that refresh (:func:`~trustscore.scoring.medals.real_items`)."""
        if self.medals is None:
            raise ValueError("this rating state keeps no medal counts")
        size = len(self._names)
        if size == 0:
            shape = (0, len(self.medals.spec.thresholds))
            return np.zeros(shape, dtype=np.int64), np.zeros(shape, dtype=np.int64)
        self._sorted_names()
        return self._columns["medal_real_n"][:size].copy(), self._columns["medal_newest"][:size].copy()

    def refresh(self, at: int, rows_of: RowsOf) -> RatingColumns:
        """Every agent's rating at ``at`` (agents sorted by id), bit for bit the full recompute at ``at``.

        O(agents) for a model without decay or with an anchored one; agents whose counted rows differ at
        ``at`` (and every agent of a model with an unanchored decay) are recomputed from ``rows_of`` and
        kept for the next refresh.
        """
        if not self._names:
            return score_columns(EvidenceBuilder().build(), SnapshotBatch.empty(), self.weights, at, ())
        agents = self._sorted_names()
        size = len(agents)
        stale = (at < self._valid_from[:size]) | (at >= self._valid_until[:size])
        if self.weights.spec.decay is not None and not self._anchored:
            return self._refresh_decayed(at, agents, stale, rows_of)
        if stale.any():
            names = tuple(agents[i] for i in np.flatnonzero(stale).tolist())
            self.update(*rows_of(names), at, names)
        if self._anchored:
            return rate_sums(
                CellSums(names=agents, **{name: self._columns[name][:size].copy() for name in _SUMS}),
                self.weights,
                at,
            )
        fresh = np.flatnonzero(~stale)
        adjusted = self._columns["adjusted"]
        adjusted[fresh] = freshness_adjusted(
            self._columns["total"][fresh], self._newest[fresh], self._columns["n"][fresh], at, self.weights
        )
        return RatingColumns(
            agents=agents, **{name: self._columns[name][:size].copy() for name in PER_AGENT_FIELDS}
        )

    def _refresh_decayed(
        self, at: int, agents: tuple[str, ...], stale: NDArray[np.bool_], rows_of: RowsOf
    ) -> RatingColumns:
        """A model with decay: every formula that reads the time runs over every counted row (the limit
        in the module docstring); the selection of those rows, their values and snapshot consistency are
        kept per agent while it stays in its window, and the rows of agents out of theirs are read again
        and spliced in (:func:`_spliced`)."""
        kept = self._counted
        if kept is not None and kept.names != agents:
            kept = None  # not the agents kept (cannot happen: update and drop keep them in step)
        orders: dict[str, I64] | None = self._orders
        names = agents if kept is None else tuple(agents[i] for i in np.flatnonzero(stale).tolist())
        if names:
            evidence, snapshots = rows_of(names)
            counted = counted_rows(evidence, snapshots, self.weights, at, names)
            kept = counted if kept is None else _spliced(kept, counted, len(self.weights.dimension_names))
            self._orders, orders = {}, None  # orders are kept from the next refresh on: no cost now
            self._store(
                names, self._arrays(None, evidence, names, at), _windows(evidence, snapshots, names, at)
            )
        assert kept is not None  # names were all the agents if nothing was kept
        self._counted = kept
        size = len(agents)
        columns = rate_counted(kept, self.weights, at, orders)
        windows = (self._newest[:size], self._valid_from[:size], self._valid_until[:size])
        self._store(agents, self._arrays(columns, None, agents, at), windows)
        return columns

    def _slots_of(self, names: tuple[str, ...], like: dict[str, np.ndarray]) -> I64:
        new = [n for n in names if n not in self._slot]
        if new:
            first = len(self._names)
            self._names += new
            self._slot.update((n, first + i) for i, n in enumerate(new))
            self._agents = None
            if len(self._names) > self._newest.size:  # capacity doubles: adding agents stays linear
                self._grow(max(len(self._names), 2 * self._newest.size, 16), like)
        return np.array([self._slot[n] for n in names], dtype=np.int64)

    def _grow(self, capacity: int, like: dict[str, np.ndarray]) -> None:
        for name in self._fields:
            template = like[name]
            grown = np.empty((capacity, *template.shape[1:]), dtype=template.dtype)
            old = self._columns.get(name)
            if old is not None:
                grown[: old.shape[0]] = old
            self._columns[name] = grown
        self._newest, self._valid_from, self._valid_until = (
            _grown(a, capacity) for a in (self._newest, self._valid_from, self._valid_until)
        )

    def drop(self, names: Collection[str]) -> None:
        """Forget ``names`` (agents no longer rated under this model): the next refresh leaves them out."""
        gone = [self._slot[n] for n in names if n in self._slot]
        if gone:
            self._renumber(np.setdiff1d(np.arange(len(self._names), dtype=np.int64), gone))
            self._agents = None
            self._counted = None  # the counted rows number the agents: a decay model re-reads them

    def _sorted_names(self) -> tuple[str, ...]:
        """The agents in ascending order, with the slots renumbered to that order (once per new agent)."""
        if self._agents is None:
            self._renumber(
                np.array(sorted(range(len(self._names)), key=self._names.__getitem__), dtype=np.int64)
            )
            self._agents = tuple(self._names)
        return self._agents

    def _renumber(self, order: I64) -> None:
        """Keep the agents in slots ``order``, in that order, as slots 0, 1, ..."""
        for name in self._fields:
            self._columns[name][: order.size] = self._columns[name][order]
        for a in (self._newest, self._valid_from, self._valid_until):
            a[: order.size] = a[order]
        self._names = [self._names[i] for i in order.tolist()]
        self._slot = {name: i for i, name in enumerate(self._names)}


def _spliced(kept: CountedRows, fresh: CountedRows, n_dims: int) -> CountedRows:
    """``kept`` with the rows of ``fresh``'s agents replaced by ``fresh``'s (agents new to ``kept`` added),
    numbered over the sorted union of their agents.

    Every formula of :func:`~trustscore.scoring.engine.rate_counted` reads the rows per agent (cell sums
    in ascending order of their terms, issuer caps per (cell, issuer), with issuer codes from one batch
    per agent) and never their order in the arrays, so the result rates exactly as the counted rows of
    every agent read at once. ``sw_order`` is taken again from the spliced source weights."""
    names = tuple(sorted(set(kept.names) | set(fresh.names)))
    position = {name: i for i, name in enumerate(names)}
    kept_code = np.array([position[n] for n in kept.names], dtype=np.int64)
    fresh_code = np.array([position[n] for n in fresh.names], dtype=np.int64)
    replaced = np.zeros(len(kept.names), dtype=np.bool_)
    fresh_names = set(fresh.names)
    replaced[[i for i, n in enumerate(kept.names) if n in fresh_names]] = True
    rows = np.flatnonzero(~replaced[kept.agent])
    agent = np.concatenate((kept_code[kept.agent[rows]], fresh_code[fresh.agent]))
    dim = np.concatenate((kept.cell[rows] % n_dims, fresh.cell % n_dims))
    source_weight = np.concatenate((kept.source_weight[rows], fresh.source_weight))
    weights, code = np.unique(source_weight, return_inverse=True)
    consistency = np.full(len(names), np.nan)
    consistency[kept_code] = kept.consistency
    consistency[fresh_code] = fresh.consistency
    issuer = None
    if kept.issuer is not None and fresh.issuer is not None:
        issuer = np.concatenate((kept.issuer[rows], fresh.issuer))
    return CountedRows(
        names=names,
        agent=agent,
        cell=agent * n_dims + dim,
        when=np.concatenate((kept.when[rows], fresh.when)),
        value=np.concatenate((kept.value[rows], fresh.value)),
        source_weight=source_weight,
        sw_order=table_order(code.reshape(-1).astype(np.int64), weights),
        extra_weight=np.concatenate((kept.extra_weight[rows], fresh.extra_weight)),
        issuer=issuer,
        consistency=consistency,
    )


def _grown(a: I64, capacity: int) -> I64:
    out = np.zeros(capacity, dtype=np.int64)
    out[: a.size] = a
    return out


def _windows(
    evidence: EvidenceBatch, snapshots: SnapshotBatch, names: tuple[str, ...], at: int
) -> tuple[I64, I64, I64]:
    """Per agent of ``names``: the newest row time <= ``at`` (the newest counted item: a superseded row
    is never newer than the row that supersedes it), and the window [from, until) of rating times at
    which the same evidence rows and snapshots count."""
    index = {name: i for i, name in enumerate(names)}
    newest = np.full(len(names), _ALWAYS)
    valid_from = np.full(len(names), _ALWAYS)
    valid_until = np.full(len(names), _NEVER)
    for table, codes, times, counts_newest in (
        (evidence.agents, evidence.agent, evidence.at, True),
        (snapshots.agents, snapshots.agent, snapshots.at, False),
    ):
        rank = np.array([index.get(name, -1) for name in table], dtype=np.int64)[codes]
        past = (rank >= 0) & (times <= at)
        future = (rank >= 0) & (times > at)
        np.maximum.at(valid_from, rank[past], times[past])
        np.minimum.at(valid_until, rank[future], times[future])
        if counts_newest:
            np.maximum.at(newest, rank[past], times[past])
    return newest, valid_from, valid_until
