"""An agent's scope-honesty view from its card versions and runs (docs/scope-honesty.md). Pure.

Components (DA, FT, BA) come from the latest run of the declarations **in force now** (same
declarations, non-capabilities and model version) opened since they came in force; a change of any of
them needs a new run (changing back too), and until then the components are null with that reason. TC and the status read every run (drift is drift).
Each run's composite uses the TC of the weekly runs before it (the document computes TC from history
before storing a run), so the per-run composites are well defined and reproducible.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

import msgspec

from trustscore.kinds.cards import AgentCard, declarations_of
from trustscore.ledger import audit
from trustscore.ledger.statements import ParsedStatement
from trustscore.scope import escalation, scores
from trustscore.scope.runs import CardVersion, Run, collect, skip_reason

_MONDAY = dt.datetime(1970, 1, 5, tzinfo=dt.UTC)
TREND_WEEKS = 4
TREND_STABLE = 2.0  # points


class Component(msgspec.Struct, frozen=True, kw_only=True):
    value: float | None
    n: int  # what the value was computed over (capabilities, induced failures, requests, weekly runs)
    reason: str | None = None  # why the value is null


class CapabilityOut(msgspec.Struct, frozen=True, kw_only=True):
    id: str
    cases_run: int
    cases_passed: int
    pass_rate: float | None
    passes: bool
    last_validated: str | None  # when the bureau last ran it (the run's close time)
    last_validated_index: int | None


class RunOut(msgspec.Struct, frozen=True, kw_only=True):
    open_index: int
    close_index: int
    at: str
    outcome: str  # reported / expired (the agent's sitting) or server (a run the server made)
    server_initiated: bool  # a scope-run/v1 the server made against the declared endpoint
    trigger: str | None  # a server run's trigger: schedule (weekly) or declarations (a changed card)
    current: bool  # evaluated the declarations in force now
    da: float | None
    ft: float
    ba: float
    tc: float
    shs: float | None
    rts: float | None


class CardOut(msgspec.Struct, frozen=True, kw_only=True):
    index: int
    at: str
    model_version: str | None
    declarations_digest: str
    capabilities: list[str]
    non_capabilities: int
    changed: list[str]


class StatusOut(msgspec.Struct, frozen=True, kw_only=True):
    index: int | None
    at: str
    status: str
    reasons: list[str]


class ServerRunsOut(msgspec.Struct, frozen=True, kw_only=True):
    """Whether the server runs the scope suite against this agent (weekly and after each declaration
    change), and if not, why (read from the newest card)."""

    scheduled: bool
    reason: str | None


class ScopeHonesty(msgspec.Struct, frozen=True, kw_only=True):
    agent: str
    at: str
    shs: float | None
    shs_reason: str | None
    tier: str | None
    da: Component
    ft: Component
    ba: Component
    tc: Component
    tc_worst_change: float | None
    rts: Component
    enterprise_ready: bool
    capabilities: list[CapabilityOut]
    trend: str | None  # up / stable / down over the last 4 weekly runs
    status: str
    status_reasons: list[str]
    human_review_required: bool
    pact_valid: bool | None  # latest weekly SHS >= 80 and not under review, suspended or cancelled
    status_history: list[StatusOut]
    evaluation_due: bool
    runs: list[RunOut]
    declarations: list[CardOut]
    server_runs: ServerRunsOut
    feeds_integrity: bool = False


def week_of(at: dt.datetime) -> int:
    return (at - _MONDAY) // dt.timedelta(days=7)


def _fmt(at: dt.datetime) -> str:
    return at.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _components(run: Run) -> tuple[Fraction | None, Fraction, Fraction]:
    da = scores.declaration_accuracy([(c.passed, c.run) for c in run.capabilities.values()])
    return (
        da,
        scores.failure_transparency(run.signalled, run.induced),
        scores.boundary_awareness(run.declined, run.out_of_scope),
    )


def build(
    agent: str, cards: list[CardVersion], runs: list[Run], now: dt.datetime, newest: AgentCard | None = None
) -> ScopeHonesty:
    return prepare(agent, cards, runs, newest).at(now)


@dataclass(frozen=True)
class Prepared:
    """A view but for the time it is read at: :meth:`at` adds what comes with time (the status, its
    history, ``at``). Preparing costs ~64 µs a run (exact fractions); :meth:`at`, O(weeks with a run).
    A reader keeps it while the agent's cards and runs stay as they are."""

    fields: dict[str, Any]
    weeks: list[escalation.WeeklyScore]
    changes: list[escalation.StatusChange]  # after each weekly run
    between: escalation.StatusChange | None  # a cancellation before the last run (cancelled_between)

    def at(self, now: dt.datetime) -> ScopeHonesty:
        history = escalation.at_time(self.weeks, self.changes, now, self.between)
        status, reasons, review = escalation.status_of(self.weeks, history)
        return ScopeHonesty(
            **self.fields,
            at=_fmt(now),
            status=status,
            status_reasons=reasons,
            human_review_required=review,
            pact_valid=escalation.pact_valid(self.weeks, status),
            status_history=[
                StatusOut(index=c.index, at=_fmt(c.at), status=c.status, reasons=c.reasons) for c in history
            ],
        )


def prepare(
    agent: str, cards: list[CardVersion], runs: list[Run], newest: AgentCard | None = None
) -> Prepared:
    """The view of ``agent`` from its card versions and runs (``newest``: its newest card), but for the
    time it is read at."""
    current = cards[-1].digest if cards else None
    # A run speaks for the declarations in force if it evaluated them and opened since they came in
    # force: a run of the same declarations from before a change to others and back does not (found by
    # review, 2026-12-07: cards A, B, then A again brought back A's better run over B's worse one, the
    # best of the draws). (A card and an open are distinct entries, so >= is > here; tests use index 0.)
    since = cards[-1].index if cards else 0

    def speaks(run: Run) -> bool:
        return run.card_digest == current and run.open_index >= since

    composites, tcs = _composites(runs)
    outs: list[RunOut] = []
    for run, shs, (tc, _) in zip(runs, composites, tcs, strict=True):
        da, ft, ba = _components(run)
        outs.append(RunOut(open_index=run.open_index, close_index=run.close_index, at=_fmt(run.at),
                           outcome=run.outcome, server_initiated=run.trigger is not None, trigger=run.trigger,
                           current=speaks(run), da=scores.pct(da),
                           ft=float(scores.pct(ft) or 0), ba=float(scores.pct(ba) or 0), tc=round(tc, 4),
                           shs=shs, rts=scores.pct(scores.red_team_score(run.resisted, run.red_team))))  # fmt: skip
    latest = next((k for k in range(len(runs) - 1, -1, -1) if speaks(runs[k])), None)
    reason = None
    if not cards or not cards[-1].capability_ids:
        reason = "no capabilities declared (an agent-card/v2 with declarations is needed)"
    elif latest is None:
        reason = (
            f"no scope sitting since the declarations or model version changed at log index {cards[-1].index}"
            if runs
            else "no scope sitting has closed yet"
        )
    if reason is not None or latest is None:
        null = Component(value=None, n=0, reason=reason)
        da_c = ft_c = ba_c = tc_c = rts_c = null
        shs, tier_, caps, worst = None, None, [], None
    else:
        run = runs[latest]
        da, ft, ba = _components(run)
        tc, series = tcs[latest]
        shs = composites[latest]
        tier_ = None if shs is None else scores.tier(shs)
        da_c = Component(value=scores.pct(da), n=len(run.capabilities))
        ft_c = Component(value=scores.pct(ft), n=run.induced,
                         reason="no failure was induced: the document gives full credit" if run.induced == 0 else None)  # fmt: skip
        ba_c = Component(value=scores.pct(ba), n=run.out_of_scope)
        tc_c = Component(value=round(tc, 4), n=len(series),
                         reason="fewer than 2 weekly runs before this one: 1.0 by definition" if len(series) < 2 else None)  # fmt: skip
        worst = round(scores.temporal_consistency_worst_change(series), 4)
        rts = scores.red_team_score(run.resisted, run.red_team)
        rts_c = Component(value=scores.pct(rts), n=run.red_team,
                          reason="this run had no red-team dialogues" if rts is None else None)  # fmt: skip
        caps = [
            CapabilityOut(id=c.capability, cases_run=c.run, cases_passed=c.passed,
                          pass_rate=None if c.run == 0 else round(c.passed / c.run, 4),
                          passes=scores.capability_passes(c.passed, c.run), last_validated=_fmt(run.at),
                          last_validated_index=run.close_index)
            for c in run.capabilities.values()
        ]  # fmt: skip
    scored = _scored(runs, composites)
    weeks = _weekly(scored)
    fields = dict(
        agent=agent,
        shs=shs,
        shs_reason=reason,
        tier=tier_,
        da=da_c,
        ft=ft_c,
        ba=ba_c,
        tc=tc_c,
        tc_worst_change=worst,
        rts=rts_c,
        enterprise_ready=rts_c.value is not None and rts_c.value >= scores.ENTERPRISE_RTS,
        capabilities=caps,
        trend=_trend(weeks),
        evaluation_due=bool(cards and cards[-1].capability_ids) and latest is None,
        runs=outs,
        server_runs=ServerRunsOut(scheduled=skip_reason(newest) is None, reason=skip_reason(newest)),
        declarations=[
            CardOut(
                index=c.index,
                at=_fmt(c.at),
                model_version=c.model_version,
                declarations_digest=c.digest,
                capabilities=c.capability_ids,
                non_capabilities=c.non_capabilities,
                changed=c.changed,
            )
            for c in cards
        ],
    )
    return Prepared(fields, weeks, escalation.run_changes(weeks), escalation.cancelled_between(scored))


def _composites(runs: list[Run]) -> tuple[list[float | None], list[tuple[float, list[float]]]]:
    """Each run's SHS (None without declarations) and its TC with the weekly series it was read from."""
    composites: list[float | None] = []
    tcs: list[tuple[float, list[float]]] = []
    # Per week, the composite of the latest run so far (in log order) of that week that has one. A run's
    # series is the entries of the 8-week window ending at its week, oldest first: 8 lookups, not a pass
    # over the runs before it (which made a view O(runs^2): 8.1 s at 3,000 runs, on every read).
    latest: dict[int, float] = {}
    for run in runs:
        week = week_of(run.at)
        series = [latest[w] for w in range(week - scores.WINDOW_WEEKS + 1, week + 1) if w in latest]
        tc = scores.temporal_consistency(series)
        da, ft, ba = _components(run)
        composite = None if da is None else scores.composite(da, ft, ba, tc)
        composites.append(composite)
        tcs.append((tc, series))
        if composite is not None:
            latest[week] = composite
    return composites, tcs


def escalation_after(runs: list[Run]) -> tuple[escalation.Status, list[str], escalation.WeeklyScore | None]:
    """The escalation status right after the last of ``runs``, its reasons and the weekly score it read
    last, judged by the log alone: at that run's own time (time passing is no log entry). What the
    ``scope.status_changed`` webhook event compares before and after each scope run."""
    scored = _scored(runs, _composites(runs)[0])
    weeks = _weekly(scored)
    if not weeks:
        return "ok", [], None
    now = max(score.at for _, score in scored)  # (the last logged may not be the latest in time)
    status, reasons, _ = escalation.status(weeks, now, escalation.cancelled_between(scored))
    return status, reasons, weeks[-1]


def _scored(runs: list[Run], composites: list[float | None]) -> list[tuple[int, escalation.WeeklyScore]]:
    """Every run with a score, in log order, with its week."""
    out = []
    for run, shs in zip(runs, composites, strict=True):
        da, ft, ba = _components(run)
        if shs is not None and da is not None:
            score = escalation.WeeklyScore(run.close_index, run.at, shs, float(da), float(ft), float(ba))
            out.append((week_of(run.at), score))
    return out


def _weekly(scored: list[tuple[int, escalation.WeeklyScore]]) -> list[escalation.WeeklyScore]:
    """The latest run of each week, as the escalation chain reads them."""
    by_week = dict(scored)
    return [by_week[w] for w in sorted(by_week)]


def _trend(weeks: list[escalation.WeeklyScore]) -> str | None:
    if len(weeks) < 2:
        return None
    last = weeks[-1]
    window = [w for w in weeks if week_of(last.at) - week_of(w.at) < TREND_WEEKS]
    if len(window) < 2:
        return None
    delta = window[-1].shs - window[0].shs
    return "stable" if abs(delta) < TREND_STABLE else "up" if delta > 0 else "down"


def statements_of(leaves: Iterable[tuple[int, bytes]]) -> list[tuple[int, ParsedStatement]]:
    """(index, statement) of stored leaves (index, leaf bytes)."""
    return [(index, audit.parse_leaf(leaf).statement) for index, leaf in leaves]


def from_leaves(agent: str, leaves: Iterable[tuple[int, bytes]], now: dt.datetime) -> ScopeHonesty:
    """The view from stored leaves (index, leaf bytes) in log order, e.g. a whole export of the log:
    other agents' entries and other kinds are ignored. Signatures are the auditor's check, not this."""
    stmts = statements_of(leaves)
    cards, runs = collect(agent, stmts)
    return build(agent, cards, runs, now, _newest_card(agent, stmts))


def _newest_card(agent: str, stmts: list[tuple[int, ParsedStatement]]) -> AgentCard | None:
    return next(
        (
            s.predicate
            for _, s in reversed(stmts)
            if isinstance(s.predicate, AgentCard) and s.facts.subject == agent
        ),
        None,
    )


class CapabilityRunOut(msgspec.Struct, frozen=True, kw_only=True):
    close_index: int
    at: str
    cases_run: int
    cases_passed: int
    passes: bool


class CapabilityHistory(msgspec.Struct, frozen=True, kw_only=True):
    agent: str
    id: str
    declared_now: bool
    declaration: dict[str, Any] | None  # as in the newest card
    runs: list[CapabilityRunOut]


def capability_history(
    agent: str, leaves: Iterable[tuple[int, bytes]], capability: str
) -> CapabilityHistory | None:
    """One capability: its current declaration and its result in every scope run (None if never seen)."""
    stmts = statements_of(leaves)
    _, runs = collect(agent, stmts)
    return capability_history_of(agent, runs, _newest_card(agent, stmts), capability)


def capability_history_of(
    agent: str, runs: list[Run], newest: AgentCard | None, capability: str
) -> CapabilityHistory | None:
    """:func:`capability_history` from the agent's collected runs and newest card."""
    decls = declarations_of(newest)[0] if newest is not None else []
    declared = next((d for d in decls if d.id == capability), None)
    out = [
        CapabilityRunOut(close_index=r.close_index, at=_fmt(r.at), cases_run=c.run, cases_passed=c.passed,
                         passes=scores.capability_passes(c.passed, c.run))
        for r in runs
        if (c := r.capabilities.get(capability)) is not None
    ]  # fmt: skip
    if declared is None and not out:
        return None
    return CapabilityHistory(
        agent=agent,
        id=capability,
        declared_now=declared is not None,
        declaration=None if declared is None else msgspec.to_builtins(declared),
        runs=out,
    )


class ScopeSummary(msgspec.Struct, frozen=True, kw_only=True):
    """What the rating response shows of scope honesty (the whole view is at ``href``)."""

    shs: float | None
    tier: str | None
    reason: str | None  # why shs is null
    status: str
    rts: float | None
    enterprise_ready: bool
    evaluation_due: bool
    href: str


def summary(view: ScopeHonesty) -> ScopeSummary:
    return ScopeSummary(
        shs=view.shs,
        tier=view.tier,
        reason=view.shs_reason,
        status=view.status,
        rts=view.rts.value,
        enterprise_ready=view.enterprise_ready,
        evaluation_due=view.evaluation_due,
        href=f"/v1/agents/{view.agent}/scope-honesty",
    )
