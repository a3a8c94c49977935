"""Ratings kept current as evidence arrives: per agent, per model, recomputed only for touched agents.

Each rating names the model, the weights digest, the time it was computed at and the log size whose
evidence it reflects, so ``trustscore score`` over an export of that log prefix at that time gives the
same numbers. Evidence is held in memory per agent; a refresh reads only rows projected since the last.

:class:`RatingView` is the read side every consumer uses (public service, pages, attestations,
snapshots). :class:`RatingService` computes ratings from evidence and, given a :class:`RatingTable`,
materialises what it computes; :class:`trustscore.services.rating_mirror.RatingMirror` is the view an
API process serves from that table without holding any evidence (docs/operations.md).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import logging
import time
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import TypeVar

import msgspec

from trustscore import resources
from trustscore.errors import InvalidInput, NotFound
from trustscore.scoring.anchored import decay_factor
from trustscore.scoring.inputs import EvidenceBatch, EvidenceItem, Snapshot, SnapshotBatch
from trustscore.scoring.medals import MedalRules, Medals, award_columns, find_medal_rules, medals_of
from trustscore.scoring.ratings import Rating, score_agents, to_ratings
from trustscore.scoring.refresh import RatingState, RowsOf
from trustscore.scoring.times import to_micros
from trustscore.scoring.weights import Weights, load_weights
from trustscore.services.metrics import Metrics
from trustscore.settings import SERVABLE_MODELS
from trustscore.store.projection_tables import EvidenceRow, ProjectionStore
from trustscore.store.ratings import RatingRow, RatingTable

log = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_WEIGHTS_DIR = resources.path("weights")
# Served unless TRUSTSCORE_MODELS says otherwise (settings.SERVABLE_MODELS: trustscore-v3 is opt-in);
# trustscore-v1: offline only (docs/methodology.md).
RELEASED_MODELS = ("trustscore-v2", "baseline-v0.3")
DEFAULT_MODEL = SERVABLE_MODELS[0]


def load_models(
    weights_dir: Path = DEFAULT_WEIGHTS_DIR, names: Iterable[str] = RELEASED_MODELS
) -> dict[str, Weights]:
    return {name: load_weights(weights_dir / f"{name}.toml") for name in names}


def load_medals(models: dict[str, Weights], weights_dir: Path = DEFAULT_WEIGHTS_DIR) -> dict[str, MedalRules]:
    """The medals file of every model that has one (docs/methodology.md, "Medals")."""
    found = {name: find_medal_rules(weights_dir, w) for name, w in models.items()}
    return {name: rules for name, rules in found.items() if rules is not None}


class RatedAgent(msgspec.Struct, frozen=True, gc=False):
    """A rating with the time it was computed at and the log size it holds for.

    A struct the cycle collector does not track (it holds only untracked structs, a time and numbers):
    a refresh replaces one per agent and model."""

    rating: Rating
    at: dt.datetime
    log_size: int
    medals: Medals | None = None  # None: the model has no medals file


Scored = dict[str, list[tuple[Rating, Medals | None]]]  # by model: each rating with its medals


@dataclass
class _Prepared:
    """Ratings made ready to put in place: per model each agent's kept rating, and (for a service with a
    table) each row to publish. Built with the ratings, off the event loop for a refresh of many agents:
    at 10^5 agents and three models, building and encoding them took 1.8-2.1 s; the loop then only
    updates its dicts with them."""

    at: dt.datetime  # the time they were computed at
    size: int  # the log prefix [0, size) they were computed from
    rated: dict[str, dict[str, RatedAgent]] = field(default_factory=dict)  # by model, then agent
    rows: dict[tuple[str, str], RatingRow] = field(default_factory=dict)  # by (model, agent)

    def retire(self, retired: list[object | None]) -> list[object | None]:
        """``retired`` with the rows, which this then lets go: freed where ``retired`` is, unless the
        staged rows (a write that failed or was not made) still hold them."""
        retired += self.rows.values()
        self.rows.clear()
        return retired

    def drop(self, agents: Iterable[str]) -> None:
        """Leave ``agents`` out (their ratings stay as they are)."""
        for model, rated in self.rated.items():
            for agent in agents:
                rated.pop(agent, None)
                self.rows.pop((model, agent), None)


@dataclass
class _AgentData:
    evidence: list[tuple[int, EvidenceItem]] = field(default_factory=list)  # (log index, item)
    snapshots: list[Snapshot] = field(default_factory=list)  # in log order


class RatingView:
    """Current ratings by model and agent, and the reads every consumer makes of them."""

    def __init__(
        self,
        models: dict[str, Weights],
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
        medals: dict[str, MedalRules] | None = None,
    ) -> None:
        """``medals`` defaults to the released medals files of the served models."""
        if DEFAULT_MODEL not in models:
            raise InvalidInput(f"the default model {DEFAULT_MODEL} must be served")
        self.models = models
        self.clock = clock
        self.medals = load_medals(models) if medals is None else medals
        self.size = 0  # every rating holds for the log prefix [0, size)
        # Moves whenever a kept rating changes: readers keep what they derive from the ratings by it.
        self.revision = 0
        self._ratings: dict[str, dict[str, RatedAgent]] = {m: {} for m in models}
        self._unrated: dict[str, tuple[Rating, Medals | None]] = {}  # by model: see unrated()

    def model(self, name: str | None) -> Weights:
        w = self.models.get(DEFAULT_MODEL if name is None else name)  # an empty name is not the default
        if w is None:
            raise NotFound(f"unknown model {name!r}; served: {', '.join(sorted(self.models))}")
        return w

    def _with_medals(
        self, model: str, batch: EvidenceBatch, ratings: list[Rating], at: dt.datetime
    ) -> list[tuple[Rating, Medals | None]]:
        """Each rating with its medals under the model's medals file (None for a model without one)."""
        rules = self.medals.get(model)
        if rules is None:
            return [(r, None) for r in ratings]
        return list(zip(ratings, medals_of(batch, ratings, rules, to_micros(at)), strict=True))

    def stored(self, agent: str, model: str | None = None) -> RatedAgent | None:
        """The agent's rating as last computed (its ``log_size`` is when); see :meth:`rating`."""
        return self._ratings[self.model(model).model_version].get(agent)

    def rating(self, agent: str, model: str | None = None) -> RatedAgent | None:
        """The agent's current rating. Its ``log_size`` is the whole projected log: an agent is recomputed
        whenever an entry brings it evidence or a snapshot, so the rating holds for every prefix since."""
        rated = self._ratings[self.model(model).model_version].get(agent)
        return None if rated is None else msgspec.structs.replace(rated, log_size=self.size)

    def all(self, model: str | None = None) -> list[RatedAgent]:
        return sorted(
            (
                msgspec.structs.replace(r, log_size=self.size)
                for r in self._ratings[self.model(model).model_version].values()
            ),
            key=lambda r: r.rating.agent,
        )

    def held(self, model: str | None = None) -> Mapping[str, RatedAgent]:
        """Every kept rating of ``model`` by agent: read-only, not copied, in no order. Each ``log_size``
        is the one it was computed at (:meth:`rating` gives the view's). Valid until the next ``await``:
        a change may swap in a new mapping."""
        return MappingProxyType(self._ratings[self.model(model).model_version])

    def held_copy(self, model: str | None = None) -> dict[str, RatedAgent]:
        """A copy of :meth:`held` (made in C: ~4 ms at 10^5 agents), for a reader in another thread."""
        return self._ratings[self.model(model).model_version].copy()

    def unrated(self, agent: str, model: str | None = None) -> RatedAgent:
        """The rating of a registered agent with no evidence yet: every number null, with reasons.

        It is the same for every such agent but its id, and reads no time (nothing is decayed, no item is
        fresh or stale; an anchored model still refuses a time out of its range, as scoring does): it is
        computed once per model (1-2 ms) and copied for each agent (a few µs). Before,
        every call scored the agent, and a leaderboard read called it for every registered agent without
        evidence, so free keys made each read cost 1-2 ms per key (tests/integration/api/test_idle_agents.py;
        tests/unit/services/test_unrated.py checks the copy against scoring at several times)."""
        weights = self.model(model)
        at = self.clock()
        if weights.decay_anchor is not None and weights.spec.decay is not None:
            # The one way the time matters: an anchored model refuses a rating time out of its range.
            decay_factor(to_micros(at), weights.decay_anchor, weights.spec.decay.half_life_days)
        empty = self._unrated.get(weights.model_version)
        if empty is None:
            empty = self._unrated[weights.model_version] = self.scored_without_evidence(weights, _NOBODY, at)
        rating, medals = empty
        return RatedAgent(_renamed(rating, agent), at, self.size, None if medals is None else _copied(medals))

    def scored_without_evidence(
        self, weights: Weights, agent: str, at: dt.datetime
    ) -> tuple[Rating, Medals | None]:
        """``agent``'s rating and medals under ``weights`` at ``at`` from no evidence, scored."""
        [(rating, medals)] = self._with_medals(
            weights.model_version,
            EvidenceBatch.from_items([]),
            score_agents([], [], weights, at, agents=[agent]),
            at,
        )
        return rating, medals


#: The agent an all-null rating is scored for before it is copied under each agent's id.
_NOBODY = "ts1_" + "0" * 40


def _renamed(rating: Rating, agent: str) -> Rating:
    """``rating`` under ``agent``'s id, with dicts of its own (a reader never shares them with another)."""
    u = rating.uncertainty
    return msgspec.structs.replace(
        rating,
        agent=agent,
        dimensions=dict(rating.dimensions),
        null_reasons=dict(rating.null_reasons),
        uncertainty=None if u is None else msgspec.structs.replace(u, dimensions=dict(u.dimensions)),
    )


def _copied(medals: Medals) -> Medals:
    return msgspec.structs.replace(medals, dimensions=dict(medals.dimensions))


#: A refresh reading at least this many evidence rows groups them by agent in a worker thread.
OFF_LOOP_ROWS = 20_000

#: A refresh whose touched agents hold at least this many evidence items (held and new) scores them in a
#: worker thread (scoring costs ~8 µs an item: ~40 ms here).
OFF_LOOP_ITEMS = 5_000

#: A refresh recomputing at least this many agents scores them in a worker thread (a process taking
#: the ratings lease over recomputes every agent: seconds of CPU on a large log).
OFF_LOOP_AGENTS = 512


class RatingService(RatingView):
    """Ratings computed here from the evidence, held in memory; with a ``table``, every change is also
    materialised there (with the log size it holds for) for API processes to serve."""

    def __init__(
        self,
        store: ProjectionStore,
        models: dict[str, Weights],
        metrics: Metrics,
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
        medals: dict[str, MedalRules] | None = None,
        table: RatingTable | None = None,
    ) -> None:
        super().__init__(models, clock, medals)
        self.store = store
        self.metrics = metrics
        self.table = table
        self._agents: dict[str, _AgentData] = {}
        self._generation = 0  # counts recomputations done on the event loop
        self._recomputed: dict[str, int] = {}  # agent -> the generation that last recomputed it
        # The agents a refresh is scoring in a worker thread, and the time it scores them at: a time
        # refresh at a later time finishing meanwhile leaves them as they are, so that their ratings
        # never move back in time.
        self._in_flight: frozenset[str] = frozenset()
        self._in_flight_at = dt.datetime.min.replace(tzinfo=dt.UTC)
        self._unpublished: dict[tuple[str, str], RatingRow] = {}  # (model, agent): not yet in the table
        self._staged = 0  # counts stagings into _unpublished
        self._refreshing = asyncio.Lock()  # two refreshes at once would both add the same rows
        # The time refresh's own state (recompute_all, one at a time): per model every agent's kept
        # columns (scoring/refresh.py), and the evidence and snapshot counts each agent had when added.
        self._states = {m: RatingState(w, self.medals.get(m)) for m, w in models.items()}
        self._seen: dict[str, tuple[int, int]] = {}
        self._recomputing_all = asyncio.Lock()

    async def refresh(self, publish: bool = True) -> set[str]:
        """Load evidence projected since the last refresh and recompute the agents it touches (one
        refresh at a time: the projector and the snapshot job both call it). Without ``publish`` the
        ratings are only held here, not materialised (a process not holding the ``ratings`` lease)."""
        async with self._refreshing:
            return await self._refresh(publish)

    async def _refresh(self, publish: bool) -> set[str]:
        end = await self.store.projected_size()
        if end <= self.size:
            if self._unpublished and publish:
                await self._write()  # a failed write is retried, not left stale
            return set()
        # Read everything first, then apply it with no await in between: a full recompute starting
        # meanwhile must never see evidence beyond ``self.size``, and a failed read must leave nothing
        # half-applied (the next refresh would add it twice).
        evidence = await self.store.evidence_since(self.size, end)
        snapshots = await self.store.snapshots_since(self.size, end)
        # Grouped by agent first (in a worker thread when there are many: a takeover reads the whole log);
        # nothing is applied until everything is read and grouped.
        grouped = (
            await asyncio.to_thread(_by_agent, evidence)
            if len(evidence) >= OFF_LOOP_ROWS
            else _by_agent(evidence)
        )
        touched = set(grouped).union(snap.agent for _, snap, _adjusted in snapshots)
        held = self._agents
        n_items = len(evidence) + sum(len(held[agent].evidence) for agent in touched if agent in held)
        retired: list[object | None] = []
        if len(touched) >= OFF_LOOP_AGENTS or n_items >= OFF_LOOP_ITEMS:
            prepared = await self._recompute_off_loop(
                grouped, [snap for _, snap, _ in snapshots], end, retired
            )
        else:
            for agent, items in grouped.items():
                self._agents.setdefault(agent, _AgentData()).evidence.extend(items)
            for _, snap, _adjusted in snapshots:
                self._agents.setdefault(snap.agent, _AgentData()).snapshots.append(snap)
            self.size = end
            prepared = self._recompute(touched)[1]
        self._stage_rows(prepared.rows)
        try:
            if publish:
                await self._write()
            # else: written by the first refresh that publishes
        finally:
            if retired:  # what the off-loop path replaced, and its rows: freed off the loop, one at a time
                await asyncio.to_thread(_release, prepared.retire(retired))
        return touched

    def recompute(self, agents: Iterable[str] | None = None, at: dt.datetime | None = None) -> Scored:
        """Recompute ``agents`` (default all) under every model at ``at`` (default now), here and now;
        return what was computed (not yet materialised: see :meth:`publish`)."""
        return self._recompute(agents, at)[0]

    def _recompute(
        self, agents: Iterable[str] | None = None, at: dt.datetime | None = None
    ) -> tuple[Scored, _Prepared]:
        """:meth:`recompute`, with the ratings as put in place (and their rows, not yet staged)."""
        names = sorted(self._agents if agents is None else set(agents))
        at = at or self.clock()
        if not names:
            return {}, _Prepared(at, self.size)
        self._generation += 1
        for name in names:
            self._recomputed[name] = self._generation
        scored = self._score(self._inputs(names), at)
        prepared = self._prepare(scored, at, self.size)
        self._apply(prepared, names)
        return scored, prepared

    async def _recompute_off_loop(
        self,
        grouped: dict[str, list[tuple[int, EvidenceItem]]],
        snapshots: list[Snapshot],
        end: int,
        retired: list[object | None],
    ) -> _Prepared:
        """Add ``grouped`` evidence and ``snapshots`` (the log up to ``end``) and recompute the agents
        they touch, scored in a worker thread: a refresh of many agents (a process that takes the lease
        over recomputes every one) would stall the event loop for seconds. The touched agents' data is
        built apart (their lists copied, then extended) and scored in the thread; then the data, the log
        size and the ratings are put in place with no await in between. Until then every reader sees
        the ratings and the log size of before, consistent with each other, and a full recompute
        running meanwhile reads only the evidence of before, and its ratings of these agents are dropped
        (while they are scored here, if its time is later than this one's; marked as recomputed once these
        are applied, in any case). The data and the ratings replaced are added to
        ``retired``, for the caller to free off the loop (freeing a list releases each of its items)."""
        at = self.clock()
        self._in_flight = frozenset(grouped).union(snap.agent for snap in snapshots)
        self._in_flight_at = at
        try:
            updated, prepared = await asyncio.to_thread(self._score_updated, grouped, snapshots, at, end)
        finally:
            self._in_flight = frozenset()
        retired += (held for name in updated if (held := self._agents.get(name)) is not None)
        self._agents.update(updated)
        self.size = end
        self._generation += 1
        self._recomputed.update(dict.fromkeys(updated, self._generation))
        retired += self._apply(prepared, updated)
        return prepared

    def _score_updated(
        self,
        grouped: dict[str, list[tuple[int, EvidenceItem]]],
        snapshots: list[Snapshot],
        at: dt.datetime,
        end: int,
    ) -> tuple[dict[str, _AgentData], _Prepared]:
        """The touched agents' data with ``grouped`` and ``snapshots`` added (new lists: the held ones are
        read, never written), and their ratings at ``at`` for the log prefix [0, ``end``). Safe in a worker
        thread: only a refresh, which holds the lock this runs under, changes the agents' data."""
        updated: dict[str, _AgentData] = {}
        for agent in sorted(set(grouped).union(snap.agent for snap in snapshots)):
            held = self._agents.get(agent)
            updated[agent] = (
                _AgentData() if held is None else _AgentData(list(held.evidence), list(held.snapshots))
            )
        for agent, items in grouped.items():
            updated[agent].evidence.extend(items)
        for snap in snapshots:
            updated[snap.agent].snapshots.append(snap)
        inputs = [(name, len(data.evidence), len(data.snapshots)) for name, data in updated.items()]
        return updated, self._prepare(self._score(inputs, at, updated), at, end)

    async def recompute_all(self) -> None:
        """Move every agent's rating to a new time, in a worker thread so the event loop keeps serving.

        Bit for bit a full recompute at that time, without one: each model's :class:`RatingState` re-reads
        only the rows of agents with evidence added since the last time refresh (or snapshots, for a model
        that reads them), or whose
        counted rows differ at the new time (O(agents) for baseline-v0.3 and trustscore-v3; trustscore-v2's
        decay still runs over every counted row: docs/methodology.md). Only the agents' lists as they
        stand now are read (they are only ever appended to). An agent that a refresh recomputed meanwhile,
        from newer evidence, keeps that newer rating; so does one that a refresh is scoring in a worker
        thread at an earlier time (its rating would move back in time when that refresh's came in).
        """
        async with self._recomputing_all:
            names = sorted(self._agents)
            if not names:
                return
            at = self.clock()
            size, generation = self.size, self._generation
            inputs = self._inputs(names)
            prepared = await asyncio.to_thread(self._refreshed, inputs, at, size)
        # A refresh that recomputed some agents meanwhile, from newer evidence: theirs stay. So do the
        # ratings of agents a refresh is scoring now at an earlier time than ``at``: its ratings, of newer
        # evidence, would replace these (a rating's time would move back).
        busy = self._in_flight if self._in_flight_at < at else frozenset()
        kept: Collection[str] = names
        if self._generation != generation or busy:
            newer = {agent for agent, g in self._recomputed.items() if g > generation}.union(busy)
            prepared.drop(newer)
            kept = set(names).difference(newer)
        retired = self._apply(prepared, kept)
        self._stage_rows(prepared.rows)
        try:
            await self._write()
        finally:  # written or not, what was replaced and the rows written are freed off the loop
            await asyncio.to_thread(_release, prepared.retire(retired))

    def _refreshed(self, inputs: list[tuple[str, int, int]], at: dt.datetime, size: int) -> _Prepared:
        """:meth:`_refresh_states`, made ready to put in place (in the time refresh's worker thread)."""
        return self._prepare(self._refresh_states(inputs, at), at, size)

    def _refresh_states(self, inputs: list[tuple[str, int, int]], at: dt.datetime) -> Scored:
        """Every agent of ``inputs`` rated at ``at`` from the kept states (safe in a worker thread: only
        the states and ``_seen``, which nothing else touches, are written)."""
        started = time.perf_counter()
        counts = _counts(inputs)
        changed = tuple(name for name, seen in counts.items() if self._seen.get(name) != seen)
        # A model that reads no snapshots (trustscore-v2, v3) has nothing to re-read for new snapshots
        # alone: each snapshot taken (hourly) touches every rated agent.
        new_evidence = tuple(name for name in changed if self._seen.get(name, (-1,))[0] != counts[name][0])
        micros = to_micros(at)
        # Rows read for one model serve the others (the same agents' evidence; only snapshots differ).
        read = functools.lru_cache(maxsize=4)(functools.partial(self._prefixes_of, counts))
        out: Scored = {}
        for model, state in self._states.items():
            rows_of = functools.partial(_model_rows, read, model)
            weights = self.models[model]
            if reread := changed if weights.spec.reliability.use_snapshots else new_evidence:
                update = functools.partial(_update, state, rows_of, micros)
                kept: list[str] = _each_agent(weights, reread, update)
                state.drop(set(reread).difference(kept))  # refused now: its old rating must not stay
            ratings = to_ratings(state.refresh(micros, rows_of), weights)
            rules = self.medals.get(model)
            if rules is None:
                out[model] = [(r, None) for r in ratings]
            else:
                medals = award_columns(ratings, *state.medal_counts(), rules, micros)
                out[model] = list(zip(ratings, medals, strict=True))
        self._seen.update(counts)
        self.metrics.rating_seconds.observe(time.perf_counter() - started)
        return out

    def _prefixes_of(
        self,
        counts: dict[str, tuple[int, int]],
        agents: tuple[str, ...],
        source: dict[str, _AgentData] | None = None,
    ) -> tuple[EvidenceBatch, list[Snapshot]]:
        """The first ``counts`` evidence items and snapshots of each of ``agents`` (the log prefix to score)
        in ``source`` (default: the held data)."""
        held = self._agents if source is None else source
        items: list[EvidenceItem] = []
        seq: list[int] = []
        snapshots: list[Snapshot] = []
        for name in agents:
            data = held[name]
            n_evidence, n_snapshots = counts[name]
            for index, item in data.evidence[:n_evidence]:
                items.append(item)
                seq.append(index)
            snapshots += data.snapshots[:n_snapshots]
        return EvidenceBatch.from_items(items, seq=seq), snapshots

    async def publish(self, scored: Scored, size: int) -> None:
        """Materialise ``scored`` (computed from the log prefix [0, ``size``)) and that every rating now
        holds for [0, ``self.size``), if this service has a table. Rows whose write failed, or that were
        only staged, are written with the next (the table must never claim a log size its rows do not
        reflect)."""
        if self.table is None:
            return
        encode = _Encoder()
        rows = {}
        for model, ratings in scored.items():
            kept = self._ratings[model]
            for rating, medals in ratings:
                rows[(model, rating.agent)] = _row(encode, model, rating, medals, kept[rating.agent].at, size)
        self._stage_rows(rows)
        await self._write()

    def _stage_rows(self, rows: dict[tuple[str, str], RatingRow]) -> None:
        """Keep ``rows`` for the next write (newer rows replace older ones)."""
        if rows:
            self._unpublished.update(rows)
            self._staged += 1

    async def _write(self) -> None:
        """Write the staged rows and the log size every rating holds for, if this service has a table."""
        if self.table is None:
            return
        staged, rows = self._staged, dict(self._unpublished)
        await self.table.write(list(rows.values()), self.size)
        if self._staged == staged:  # nothing staged meanwhile: every staged row was just written
            self._unpublished.clear()
            return
        for key, row in rows.items():
            if self._unpublished.get(key) is row:  # not replaced by a newer one meanwhile
                del self._unpublished[key]

    def _prepare(self, scored: Scored, at: dt.datetime, size: int) -> _Prepared:
        """``scored``, computed at ``at`` for the log prefix [0, ``size``), as kept ratings and (with a
        table) encoded rows (writes nothing shared: safe in a worker thread)."""
        encode = None if self.table is None else _Encoder()
        prepared = _Prepared(at, size)
        rows = prepared.rows
        for model, ratings in scored.items():
            rated = prepared.rated[model] = {}
            for rating, medals in ratings:
                rated[rating.agent] = RatedAgent(rating, at, size, medals)
                if encode is not None:
                    rows[(model, rating.agent)] = _row(encode, model, rating, medals, at, size)
        return prepared

    def _inputs(self, names: list[str]) -> list[tuple[str, int, int]]:
        """Each agent with how many evidence items and snapshots it has now (the prefix to score)."""
        agents = self._agents
        return [(n, len(agents[n].evidence), len(agents[n].snapshots)) for n in names]

    def _score(
        self, inputs: list[tuple[str, int, int]], at: dt.datetime, source: dict[str, _AgentData] | None = None
    ) -> Scored:
        """Score each agent's first evidence items and snapshots (of ``source``, default the held data)
        under every model (no shared state is written: safe in a worker thread while the event loop
        appends to the lists)."""
        started = time.perf_counter()
        names = tuple(n for n, _, _ in inputs)
        # Rows read for one model serve the others; an agent rated alone (_each_agent) reads its own rows.
        read = functools.lru_cache(maxsize=4)(
            functools.partial(self._prefixes_of, _counts(inputs), source=source)
        )
        out = {}
        for model, weights in self.models.items():
            rate = functools.partial(_rate, functools.partial(_model_rows, read, model), weights, at)
            out[model] = self._with_medals(model, read(names)[0], _each_agent(weights, names, rate), at)
        self.metrics.rating_seconds.observe(time.perf_counter() - started)
        return out

    def _apply(self, prepared: _Prepared, names: Collection[str]) -> list[object | None]:
        """Keep ``prepared``, computed for ``names``; a model that left one of them out (_each_agent) no
        longer rates it (a rating kept from before would look current), and with a table a row saying so
        is staged (readers holding the old row must drop it). Dict updates only: on the loop.
        Returns the ratings replaced, for a caller replacing many to free off the loop (at 10^5 agents and
        three models, freeing them here held the loop for 0.36-0.39 s)."""
        replaced: list[object | None] = []
        self.revision += 1  # readers' derived views (leaderboards) are made again
        for model, rated in prepared.rated.items():
            kept = self._ratings[model]
            replaced += map(kept.get, rated)
            kept.update(rated)
            if len(rated) < len(names):
                for name in set(names).difference(rated):
                    replaced.append(kept.pop(name, None))
                    if self.table is not None:
                        self._unpublished[(model, name)] = RatingRow(
                            model, name, None, None, prepared.at, prepared.size
                        )
                        self._staged += 1
        return replaced


def _row(
    encode: _Encoder, model: str, rating: Rating, medals: Medals | None, at: dt.datetime, size: int
) -> RatingRow:
    return RatingRow(
        model, rating.agent, encode(rating), None if medals is None else encode(medals), at, size
    )


class _Encoder:
    """JSON bytes as ``msgspec.json.encode`` gives them, encoded into one reused buffer: many objects in
    a row are encoded without growing a fresh buffer for each (the published rows)."""

    def __init__(self) -> None:
        self._encoder = msgspec.json.Encoder()
        self._buffer = bytearray()

    def __call__(self, obj: Rating | Medals) -> bytes:
        self._encoder.encode_into(obj, self._buffer)
        return bytes(self._buffer)


def _each_agent(weights: Weights, agents: Sequence[str], rate: Callable[[Sequence[str]], list[T]]) -> list[T]:
    """``rate(agents)``; if a model with an anchored decay refuses an evidence time (more than 960
    half-lives from its anchor: only a log written before intake refused such times can hold one), rate
    each half of ``agents`` alike and leave out, with an error logged, each agent it refuses alone, so
    that one agent cannot stop every other agent's ratings (halves, not one agent at a time: ``rate``
    costs a pass over the rows it is given, and a log holds few such agents). A left-out agent has no
    rating under that model."""
    try:
        return rate(agents)
    except InvalidInput as exc:
        if weights.decay_anchor is None:
            raise
        if len(agents) == 1:
            log.error("%s leaves out %s: %s", weights.model_version, agents[0], exc)
            return []
    middle = len(agents) // 2
    return _each_agent(weights, agents[:middle], rate) + _each_agent(weights, agents[middle:], rate)


def _model_rows(
    read: Callable[[tuple[str, ...]], tuple[EvidenceBatch, list[Snapshot]]],
    model: str,
    agents: tuple[str, ...],
) -> tuple[EvidenceBatch, SnapshotBatch]:
    """``agents``' rows for ``model``: their evidence and the model's snapshots of them."""
    batch, snapshots = read(agents)
    return batch, SnapshotBatch.from_items(s for s in snapshots if s.model_version == model)


def _update(state: RatingState, rows_of: RowsOf, at: int, agents: Sequence[str]) -> list[str]:
    """Keep ``agents``' rows in ``state``; return them (for :func:`_each_agent`: the agents kept)."""
    state.update(*rows_of(tuple(agents)), at, agents)
    return list(agents)


def _rate(rows_of: RowsOf, weights: Weights, at: dt.datetime, agents: Sequence[str]) -> list[Rating]:
    """``agents``' ratings at ``at`` from their own rows (for :func:`_each_agent`)."""
    return score_agents(*rows_of(tuple(agents)), weights, at, agents=agents)


def _release(retired: list[T]) -> None:
    """Drop ``retired`` one object at a time (in a worker thread: between two the event loop may run,
    where freeing them all at once would hold it for a pass over every item)."""
    while retired:
        retired.pop()


def _by_agent(evidence: list[EvidenceRow]) -> dict[str, list[tuple[int, EvidenceItem]]]:
    """Each agent's ``(log index, item)`` pairs of ``evidence``, in log order."""
    out: dict[str, list[tuple[int, EvidenceItem]]] = {}
    for row in evidence:
        out.setdefault(row.item.agent, []).append((row.index, row.item))
    return out


def _counts(inputs: list[tuple[str, int, int]]) -> dict[str, tuple[int, int]]:
    """Each agent's evidence and snapshot counts (the prefix to score) by name."""
    return {name: (n_evidence, n_snapshots) for name, n_evidence, n_snapshots in inputs}
