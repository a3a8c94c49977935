"""Scope-honesty runs and declaration history from an agent's log entries (docs/scope-honesty.md). Pure.

A *run* is a closed ``scope@1`` sitting (the sitting-open's form names, per part, the declaration under
test (params) and so every item's role; the sitting-close carries the server's grades) or a
``scope-run/v1`` the server made against the agent's endpoint (form and grades in one statement). The
*card in force* at a run is the agent's newest card logged before its sitting-open (or its scope run). Everything here is read from
statements, so the server and anyone holding an export compute the same runs.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import msgspec

from trustscore.exams.generators.scope import FAILURE_ROLES, role_of
from trustscore.kinds.cards import AgentCard, declarations_digest, declarations_of
from trustscore.kinds.graded import GradedItem
from trustscore.kinds.scope_run import SCOPE_EXAM, ScopeRun
from trustscore.kinds.sittings import FormPart, SittingClose, SittingOpen
from trustscore.ledger.statements import ParsedStatement, parse_time

CAPABILITY_CASES = ("easy", "medium", "hard", "adversarial")
OUT_OF_SCOPE = ("excluded", "non_capability", "generic")


@dataclass(frozen=True)
class CardVersion:
    """One card of the agent: what it declared and under which model version."""

    index: int
    at: dt.datetime
    model_version: str | None
    digest: str  # declarations_digest: declarations + non-capabilities + model version
    capability_ids: list[str]
    non_capabilities: int
    changed: list[str]  # what differs from the previous card: declarations, non_capabilities, model_version


@dataclass
class CapabilityResult:
    capability: str
    run: int = 0
    passed: int = 0


@dataclass
class Run:
    open_index: int
    close_index: int
    at: dt.datetime  # closed_at (ran_at of a server run)
    outcome: str  # reported / expired (sittings), server (a scope-run/v1)
    card_digest: str | None  # the declarations in force when the sitting opened
    model_version: str | None
    capabilities: dict[str, CapabilityResult] = field(default_factory=dict)
    signalled: int = 0  # failure-inducing cases with an explicit signal
    induced: int = 0  # failure-inducing cases that were failures (a correct answer is not one)
    handled_beyond: int = 0  # failure-inducing cases answered correctly anyway
    declined: int = 0
    out_of_scope: int = 0
    resisted: int = 0  # red-team dialogues resisted
    red_team: int = 0  # red-team dialogues attempted
    trigger: str | None = None  # a server run's trigger (schedule / declarations); None: the agent's sitting


def skip_reason(card: AgentCard | None) -> str | None:
    """Why the server does not run the scope suite for an agent whose newest card is ``card`` (None: it
    does, weekly and after each declaration change)."""
    if card is None:
        return "no agent card"
    if not declarations_of(card)[0]:
        return "no capabilities declared (an agent-card/v2 with declarations is needed)"
    if not card.endpoint:
        return "no endpoint in the agent card: the server cannot run the scope suite against it"
    return None


def _changes(prev: AgentCard | None, card: AgentCard) -> list[str]:
    if prev is None:
        return ["first card"]
    (d0, n0), (d1, n1) = declarations_of(prev), declarations_of(card)
    out = []
    if d0 != d1:
        out.append("declarations")
    if n0 != n1:
        out.append("non_capabilities")
    if prev.model_version != card.model_version:
        out.append("model_version")
    return out


def collect(
    agent: str, entries: Iterable[tuple[int, ParsedStatement]]
) -> tuple[list[CardVersion], list[Run]]:
    """The agent's card versions and closed scope runs, from statements in log order."""
    collector = Collector(agent)
    collector.feed(entries)
    return collector.cards, collector.runs


class Collector:
    """:func:`collect` as a fold that can be resumed: statements fed in log order, over any number of
    calls, leave the card versions and runs one call over all of them gives, and ``card``, the newest
    agent card about the agent (the card in force). A reader keeps one per agent and feeds it only what
    was logged since (services/scope.py), instead of parsing the agent's whole history at every read."""

    def __init__(self, agent: str) -> None:
        self.agent = agent
        self.cards: list[CardVersion] = []
        self.runs: list[Run] = []
        self.card: AgentCard | None = None
        self._opens: dict[int, tuple[SittingOpen, AgentCard | None]] = {}

    def feed(self, entries: Iterable[tuple[int, ParsedStatement]]) -> None:
        agent = self.agent
        for index, stmt in entries:
            p = stmt.predicate
            if isinstance(p, AgentCard) and stmt.facts.subject == agent:
                decls, non = declarations_of(p)
                changed = _changes(self.card, p)
                if changed:
                    self.cards.append(CardVersion(index, parse_time(p.issued_at, what="issued_at"), p.model_version,
                                                  declarations_digest(p), [d.id for d in decls], len(non), changed))  # fmt: skip
                self.card = p
            elif isinstance(p, SittingOpen) and p.agent == agent and p.exam == SCOPE_EXAM:
                self._opens[index] = (p, self.card)
            elif (
                isinstance(p, SittingClose)
                and p.agent == agent
                and p.exam == SCOPE_EXAM
                and p.sitting in self._opens
            ):
                o, in_force = self._opens.pop(p.sitting)
                self.runs.append(_run(o.form, p.items, in_force, p.sitting, index, p.closed_at, p.outcome))
            elif isinstance(p, ScopeRun) and p.agent == agent and p.exam == SCOPE_EXAM:
                # It evaluated the card it names; a card logged while it ran (another model version
                # only: same declarations, same form) is not that card (found by review, 2026-12-07).
                named = self.card is not None and declarations_digest(self.card) == p.declarations_digest
                run = _run(p.form, p.items, self.card if named else None, index, index, p.ran_at, "server")
                run.trigger = p.trigger
                self.runs.append(run)


def _tested(form: list[FormPart]) -> tuple[list[Any], list[Any]]:
    """The declarations and non-capabilities a scope sitting's form was built from."""
    params = [p.params for p in form if p.params is not None]
    decls = [p["capability"] for p in params if "non_capabilities" not in p and not p.get("red_team")]
    non: list[Any] = next((p["non_capabilities"] for p in params if "non_capabilities" in p), [])
    return decls, non


def _run(
    form: list[FormPart],
    items: list[GradedItem],
    card: AgentCard | None,
    open_index: int,
    close_index: int,
    at: str,
    outcome: str,
) -> Run:
    # The run speaks for the card in force at the open only if the form tested exactly that card's
    # declarations (a card logged between the server reading it and the open must not inherit the run).
    tested = card is not None and _tested(form) == tuple(
        msgspec.to_builtins(x) for x in declarations_of(card)
    )
    run = Run(
        open_index=open_index,
        close_index=close_index,
        at=parse_time(at, what="closed_at"),
        outcome=outcome,
        card_digest=declarations_digest(card) if tested and card is not None else None,
        model_version=None if card is None else card.model_version,
    )
    roles: dict[str, tuple[str, str]] = {}  # item id -> (role, capability id)
    for part in form:
        if part.params is None:
            continue
        cap = str(part.params.get("capability", {}).get("id", ""))
        if "non_capabilities" not in part.params:
            run.capabilities[cap] = CapabilityResult(cap)
        for n in range(1, part.count + 1):
            roles[f"{part.prefix}-{n:03d}"] = (role_of(part.params, n), cap)
    for item in items:
        role, cap = roles.get(item.item_id, ("", ""))
        if role in CAPABILITY_CASES:
            r = run.capabilities[cap]
            r.run += 1
            r.passed += item.result == "success"
        elif role in FAILURE_ROLES:
            if item.result == "partial":
                run.handled_beyond += 1
            else:
                run.induced += 1
                run.signalled += item.result == "success"
        elif role in OUT_OF_SCOPE:
            run.out_of_scope += 1
            run.declined += item.result == "success"
        elif role == "red_team":
            run.red_team += 1
            run.resisted += item.result == "success"
    return run
