"""Admission and evidence of ``work-record/v1``, called from ``ledger/admission.py`` and
``evidence/derive.py`` (kept here so the ladder is one folder; docs/evidence-ladder.md).

Admission: the subject is a registered agent. ``attestation: self`` is signed by the agent itself or by
a registered key of the same interest (the same controller, or controlled by the agent): a harness or
the agent's own CI acting for it. ``attestation: confirmed`` is signed by a registered counterparty,
marketplace or CI party (party card role ``ci``) of another interest.

Evidence: one ``delivery`` item per record at rung ≥ 1 under :data:`~trustscore.ladder.rule.SCORING_RULE`:
result ``success`` for a ``done`` claim, ``partial`` for ``partial`` or ``unknown``; source ``real``
when confirmed, ``self-reported`` when self-attested; key ``work:{reporter}:{task_ref}`` (a reporter's
later record of a task corrects its earlier one); issuer the reporter; ``extra_weight`` =
:func:`~trustscore.ladder.rule.weight`. A rung-0 record (unflown, or a claimed failure) carries no
scoring evidence; it still has a ladder row.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trustscore.errors import InvalidInput, UnknownSigner
from trustscore.ladder.rule import SCORING_RULE, UNFLOWN, rung_of, weight
from trustscore.ledger.statements import ParsedStatement, parse_time
from trustscore.ledger.work_records import WorkRecord

if TYPE_CHECKING:  # admission.py and derive.py import this module: no run-time imports back
    from collections.abc import Callable

    from trustscore.evidence.derive import DerivedEvidence
    from trustscore.ledger.admission import Lookup, Registration

#: Party kinds whose word confirms someone else's work.
CONFIRMING_KINDS = ("ci", "counterparty", "marketplace")


def _registered(lookup: Lookup, kid: str, what: str) -> Registration:
    reg = lookup(kid)
    if reg is None:
        raise UnknownSigner(f"{what} {kid} is not registered")
    return reg


def admit_rule(stmt: ParsedStatement, lookup: Lookup) -> None:
    """Raise unless the signer may report this work record with this attestation (module docstring)."""
    from trustscore.ledger.admission import _same_interest  # at call time: admission imports this module

    w = stmt.predicate
    if not isinstance(w, WorkRecord):
        raise InvalidInput(f"not a work record but a {stmt.kind.predicate_type} statement")
    agent = _registered(lookup, w.agent, "agent")
    if agent.kind != "agent":
        raise InvalidInput(f"agent {w.agent} is registered as {agent.kind}, not agent")
    reporter = _registered(lookup, w.reporter, "reporter")
    same = _same_interest(reporter, agent)
    if w.attestation == "self":
        if not same:
            raise InvalidInput(
                "a self-attested work record must be signed by the agent or a key of its own controller"
            )
        return
    if reporter.kind not in CONFIRMING_KINDS:
        raise InvalidInput(
            f"reporter {reporter.id} is registered as {reporter.kind}; confirmations come from a "
            "counterparty, marketplace or ci party"
        )
    if same:
        raise InvalidInput("self-dealing: a confirming reporter must not share the agent's controller")


def derive_work_record(
    index: int, w: WorkRecord, reporter_weight: Callable[[str, int], float]
) -> list[DerivedEvidence]:
    """The scoring evidence of the admitted work record logged at ``index`` (module docstring)."""
    from trustscore.evidence.derive import DerivedEvidence  # at call time: derive.py imports this module

    r = rung_of(w, SCORING_RULE)
    if r.rung == UNFLOWN:
        return []
    rw = 1.0 if w.attestation == "self" else reporter_weight(w.reporter, index)
    done = w.claimed_outcome == "done"
    return [
        DerivedEvidence(
            index=index,
            agent=w.agent,
            dimension="delivery",
            source="real" if w.attestation == "confirmed" else "self-reported",
            at=parse_time(w.finished_at, what="finished_at"),
            value=1.0 if done else 0.5,
            result="success" if done else "partial",
            key=f"work:{w.reporter}:{w.task_ref}",
            issuer=w.reporter,
            extra_weight=weight(r.rung, w.attestation, rw),
        )
    ]
