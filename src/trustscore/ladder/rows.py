"""Every evidence item's rung: the ladder row of each derived item, and of each work record.

Pure: a row depends only on the statement, the items ``derive`` made of it (after the reporter-standing
policy) and the rule version the index is on. The mapping (docs/evidence-ladder.md, "Every evidence item
has a rung"):

* graded exam items, sitting items and server re-verifications: rung 3 when the server's grader passed
  the item (``success``), else rung 2 (an answer was produced; the grader did not pass it) — attested by
  the server;
* settlements and marketplace events: rung 5 when the counterparty or marketplace confirms delivery,
  payment or the trade (``delivery`` pass or late, ``payment`` pass, ``confirmed``, events ``delivered``
  and ``confirmed``), else rung 0 (they confirm that it did not happen) — attested ``confirmed``;
* work records: the rung of :func:`trustscore.ladder.rule.rung_of` under the index's rule; one row per
  record even when it carries no scoring evidence (``seq`` null).

Rows never change the evidence: released models score exactly what they scored before. How rows are
derived is versioned (:data:`VERSION`), recorded with the evidence's derivation versions, so a release
deriving them otherwise derives the rows of every projected entry again at start-up.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Final

import msgspec

from trustscore.kinds.events import Event
from trustscore.kinds.graded import GradedEvidence
from trustscore.kinds.reverification import Reverification
from trustscore.kinds.settlements import Settlement
from trustscore.kinds.sittings import SittingClose
from trustscore.kinds.work_records import WorkRecord
from trustscore.ladder.rule import (
    ARTIFACT_CHANGED,
    CI_VERIFIED,
    CURRENT_RULE,
    TEST_OR_BUILD_PASSED,
    UNFLOWN,
    Attested,
    rung_of,
)
from trustscore.ledger.statements import ParsedStatement

if TYPE_CHECKING:
    from trustscore.scoring.inputs import DerivedEvidence

_CONFIRMING_EVENTS = frozenset({"delivered", "confirmed"})


#: How rows are derived: ``ladder-rows@2`` (2026-12-08) names a work record's repository; ``@1`` (until then,
#: unrecorded) did not.
VERSION: Final = "ladder-rows@2"


class LadderRow(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """One rung-bearing row: ``index`` is the statement's log index, ``seq`` the position of its
    evidence item among that statement's items (null for a work record with no scoring evidence)."""

    index: int
    seq: int | None
    agent: str
    dimension: str
    rung: int
    rule: str
    attested: Attested
    cover: str  # what the row is about: two rows of one agent, dimension and cover cover the same thing
    issuer: str | None
    outcome_detected: bool
    summary: str
    kind: str
    model: str | None = None
    adapter: str | None = None
    exam: str | None = None
    marketplace: str | None = None
    repo: str | None = None  # a work record's repository: its first commit's (docs/evidence-ladder.md)


def _row(
    d: DerivedEvidence,
    seq: int,
    kind: str,
    rule: str,
    rung: int,
    attested: Attested,
    summary: str,
    issuer: str | None = None,
    **groups: str,
) -> LadderRow:
    """The row of derived item ``d`` (the ``seq``-th of its statement); ``issuer`` the statement's reporter
    (else the item's): a pooled item's issuer is the pool's, and a reporter's later row must replace its
    own earlier one whether or not either was pooled."""
    return LadderRow(
        index=d.index,
        seq=seq,
        agent=d.agent,
        dimension=d.dimension,
        rung=rung,
        rule=rule,
        attested=attested,
        cover=d.key or f"{kind}:{d.index}:{seq}",
        issuer=issuer or d.issuer,
        outcome_detected=True,
        summary=summary,
        kind=kind,
        **groups,  # model, adapter, exam or marketplace
    )


def _server(d: DerivedEvidence, seq: int, kind: str, rule: str, exam: str) -> LadderRow:
    if d.result == "success":
        return _row(
            d, seq, kind, rule, TEST_OR_BUILD_PASSED, "server", "the server's grader passed it", exam=exam
        )
    return _row(d, seq, kind, rule, ARTIFACT_CHANGED, "server", f"graded {d.result}", exam=exam)


def _confirmed(
    d: DerivedEvidence,
    seq: int,
    kind: str,
    rule: str,
    yes: bool,
    what: str,
    by: tuple[str, Attested],
    **groups: str,
) -> LadderRow:
    reporter, attested = by
    if yes:
        return _row(d, seq, kind, rule, CI_VERIFIED, attested, f"{what} confirmed", reporter, **groups)
    return _row(d, seq, kind, rule, UNFLOWN, attested, f"{what} reported as not done", reporter, **groups)


def _settled(s: Settlement, dimension: str) -> bool:
    if dimension == "delivery":
        return s.delivery in ("pass", "late")
    if dimension == "reliability":
        return s.payment == "pass"
    return s.confirmed


def _work(index: int, w: WorkRecord, items: Sequence[DerivedEvidence], rule: str, by: Attested) -> LadderRow:
    r = rung_of(w, rule)
    return LadderRow(
        index=index,
        seq=0 if items else None,
        agent=w.agent,
        dimension="delivery",
        rung=r.rung,
        rule=r.rule,
        attested=by,
        cover=f"work:{w.task_ref}",
        issuer=w.reporter,
        outcome_detected=r.outcome_detected,
        summary=r.summary,
        kind="work-record",
        model=w.model,
        adapter=w.adapter,
        repo=w.commits[0].repository if w.commits else None,
    )


def ladder_rows(
    index: int,
    statement: ParsedStatement,
    items: Sequence[DerivedEvidence],
    rule: str = CURRENT_RULE,
    standing: Callable[[str], bool] = lambda _reporter: True,
) -> list[LadderRow]:
    """The ladder rows of the admitted statement logged at ``index`` whose derived items are ``items``;
    ``standing(reporter)``: whether a confirming reporter had standing there (the reporter-standing policy's
    word, as derivation used it): a row of one without is ``unvouched``."""
    p = statement.predicate
    kind = statement.kind.name

    def by(reporter: str) -> Attested:
        return "confirmed" if standing(reporter) else "unvouched"

    if isinstance(p, WorkRecord):
        return [_work(index, p, items, rule, "self" if p.attestation == "self" else by(p.reporter))]
    if isinstance(p, GradedEvidence | SittingClose | Reverification):
        return [_server(d, seq, kind, rule, p.exam) for seq, d in enumerate(items)]
    if isinstance(p, Settlement):
        reporter = (p.reporter, by(p.reporter))
        return [
            _confirmed(d, seq, kind, rule, _settled(p, d.dimension), d.dimension, reporter)
            for seq, d in enumerate(items)
        ]
    if isinstance(p, Event):
        yes, marketplace = p.event in _CONFIRMING_EVENTS, (p.marketplace, by(p.marketplace))
        return [
            _confirmed(d, seq, kind, rule, yes, p.event, marketplace, marketplace=p.marketplace)
            for seq, d in enumerate(items)
        ]
    return []
