"""The evidence of the sitting kinds, called from ``evidence/derive.py`` (docs/evidence-mapping.md).

Who may make each sitting statement is an admission rule in ``kinds/admission.py``.

- A ``sitting-close`` yields one evidence item per graded item: source ``verified`` (the items were
  hidden until the sitting closed), key ``sitting:<open index>:<item id>``, at ``closed_at``. An expired
  sitting's items are all failures. The other three kinds carry no evidence.
"""

from __future__ import annotations

from trustscore.kinds.sittings import SITTING_KINDS, SittingClose
from trustscore.ledger.statements import ParsedStatement, parse_time
from trustscore.scoring.inputs import DerivedEvidence

SOURCE = "verified"
KEY_PREFIX = "sitting:"  # every key of a sitting's item, and no other item's
__all__ = ["SITTING_KINDS", "derive_sitting"]


def derive_sitting(index: int, stmt: ParsedStatement) -> list[DerivedEvidence]:
    """The evidence of an admitted sitting statement logged at ``index`` (only closes carry any)."""

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
            key=f"{KEY_PREFIX}{c.sitting}:{item.item_id}",
            issuer=None,
        )
        for item in c.items
    ]
