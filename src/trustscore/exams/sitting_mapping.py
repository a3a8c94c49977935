"""Admission and evidence rules of the sitting kinds, called from ``ledger/admission.py`` and
``evidence/derive.py`` (kept here so the sitting feature is one folder; docs/evidence-mapping.md).

- ``sitting-request`` and ``sitting-report``: the signer is a registered agent.
- ``sitting-open`` and ``sitting-close``: the signer is a service key with the ``grader`` role and the
  subject a registered agent.
- A ``sitting-close`` yields one evidence item per graded item: source ``verified`` (the items were
  hidden until the sitting closed), key ``sitting:<open index>:<item id>``, at ``closed_at``. An expired
  sitting's items are all failures. The other three kinds carry no evidence.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from trustscore.errors import InvalidInput, UnknownSigner
from trustscore.exams.sitting_kinds import SITTING_KINDS, SittingClose
from trustscore.ledger.statements import ParsedStatement, parse_time

if TYPE_CHECKING:  # admission.py and derive.py import this module: no run-time imports back
    from trustscore.evidence.derive import DerivedEvidence
    from trustscore.ledger.admission import Lookup, Registration

SOURCE = "verified"
__all__ = ["SITTING_KINDS", "admit_rule", "derive_sitting"]


def _registered(lookup: Lookup, kid: str, what: str, kind: str) -> Registration:
    reg = lookup(kid)
    if reg is None:
        raise UnknownSigner(f"{what} {kid} is not registered")
    if reg.kind != kind:
        raise InvalidInput(f"{what} {kid} is registered as {reg.kind}, not {kind}")
    return reg


def admit_rule(stmt: ParsedStatement, lookup: Lookup) -> None:
    """Raise unless the signer may make this sitting statement (see the module docstring)."""
    if stmt.kind.name in ("sitting-request", "sitting-report"):
        _registered(lookup, stmt.facts.signer, "agent", "agent")
        return
    service = _registered(lookup, stmt.facts.signer, "sitting service", "service")
    if "grader" not in service.roles:
        raise InvalidInput(f"service key {service.id} has no grader role")
    _registered(lookup, stmt.facts.subject, "agent", "agent")


def derive_sitting(index: int, stmt: ParsedStatement) -> list[DerivedEvidence]:
    """The evidence of an admitted sitting statement logged at ``index`` (only closes carry any)."""
    from trustscore.evidence.derive import DerivedEvidence  # at call time: derive.py imports this module

    c = stmt.predicate
    if not isinstance(c, SittingClose) or c.exam.startswith("scope@"):
        return []  # scope sittings feed the scope-honesty score, not the dimensions (docs/scope-honesty.md)
    at = parse_time(c.closed_at, what="closed_at")
    return [
        DerivedEvidence(
            index=index,
            agent=c.agent,
            dimension=item.dimension,
            source=SOURCE,
            at=at,
            value=item.value_millis / 1000,
            result=item.result,
            key=f"sitting:{c.sitting}:{item.item_id}",
            issuer=None,
        )
        for item in c.items
    ]
