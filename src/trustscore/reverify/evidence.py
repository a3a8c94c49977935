"""The evidence of ``reverification/v1``, for ``evidence/derive.py`` to call (docs/reverification.md,
"Evidence"). Who may sign one is an admission rule in ``kinds/admission.py``.

Evidence (source ``verified``, issuer ``server-reverify``, at ``ran_at``):

- integrity, key ``reverify:standing:{exam}@{exam_version}``: the agent's standing on that exam version,
  replaced by each later run of any report of it (one standing item per agent and exam version, so
  re-submitting a report cannot multiply it; issue #10). match: value = share, success; mismatch: value = share, partial (share >= 500) or
  failure; unreachable: value 0, failure (a down endpoint is never a silent pass; a later match heals it).
- integrity, key ``reverify:mismatch:{report_index}:{seed}``, mismatch only: value 0, failure. It is never
  replaced, so a mismatch keeps counting against integrity after the endpoint matches again.
- integrity, key ``reverify:private-gap:{exam}@{exam_version}``, when the run asked public and private
  items: 0 / failure when the mean public grade exceeds the mean private grade by more than
  ``status.PRIVATE_GAP_MILLIS`` (public answers memorised), else 1 / success; replaced by later runs.
- each answered private item: its dimension, value and result, key ``exam:{name@version}:{item_id}`` (the
  key graded private evidence uses, so a newer answer to the same item replaces the older). A run's fresh
  instances (item ids ``fresh-…``: new items each run) are weighed by the standing policy by the time
  since the agent's previous run (``evidence/derive.py``, standing-v4). A failed
  security probe is held back while it only starts a downgrade streak (security.DOWNGRADE_RUNS).
"""

from __future__ import annotations

from trustscore.errors import InvalidInput
from trustscore.kinds.reverification import Reverification
from trustscore.kinds.reverification.sampling import FRESH_ITEM_PREFIX
from trustscore.ledger.statements import ParsedStatement, parse_time
from trustscore.reverify.status import gap_exceeded, private_gap
from trustscore.scoring.inputs import DerivedEvidence, Result

#: The issuer of re-verification evidence: the literal the released trustscore-v1 weights file exempts
#: from the issuer cap. The key that signed is in the statement's ``verifier``.
ISSUER = "server-reverify"
SOURCE = "verified"
PARTIAL_FROM_MILLIS = 500
#: The longest item id an exam file may have (exams/loader.py), which a fresh instance's id exceeds.
MAX_EXAM_ITEM_ID = 64


def standing(r: Reverification) -> tuple[float, Result]:
    """The value and result of the report's integrity standing after run ``r``."""
    if r.outcome == "match":
        return r.matched_millis / 1000, "success"
    if r.outcome == "mismatch":
        return r.matched_millis / 1000, "partial" if r.matched_millis >= PARTIAL_FROM_MILLIS else "failure"
    return 0.0, "failure"


def standing_key(r: Reverification) -> str:
    """The key of the standing item: one per agent (keys are per agent) and exam version."""
    return f"reverify:standing:{r.exam}@{r.exam_version}"


def is_fresh(issuer: str | None, key: str | None) -> bool:
    """Whether an evidence item (by its issuer and key) is a run's fresh instance (docs/reverification.md,
    "Fresh instances"): each run's are new items, spaced in time by the standing policy (standing-v4)."""
    if issuer != ISSUER or key is None or not key.startswith("exam:"):
        return False
    item_id = key.rsplit(":", 1)[-1]  # fresh-<base64url signature>: longer than any exam file's id (64)
    return item_id.startswith(FRESH_ITEM_PREFIX) and len(item_id) > MAX_EXAM_ITEM_ID


def derive_reverification(index: int, stmt: ParsedStatement) -> list[DerivedEvidence]:
    """The evidence items of the admitted re-verification logged at ``index``, in a fixed order."""

    r = stmt.predicate
    if not isinstance(r, Reverification):
        raise InvalidInput(f"not a re-verification but a {stmt.kind.predicate_type} statement")
    at = parse_time(r.ran_at, what="ran_at")

    def item(dimension: str, value: float, result: Result, key: str) -> DerivedEvidence:
        return DerivedEvidence(
            index=index,
            agent=r.agent,
            dimension=dimension,
            source=SOURCE,
            at=at,
            value=value,
            result=result,
            key=key,
            issuer=ISSUER,
        )

    value, result = standing(r)
    out = [item("integrity", value, result, standing_key(r))]
    if r.outcome == "mismatch":
        out.append(item("integrity", 0.0, "failure", f"reverify:mismatch:{r.report_index}:{r.seed}"))
    if private_gap(r) is not None:  # public answers far above private ones: memorised, not able
        exceeded = gap_exceeded(r)
        out.append(
            item(
                "integrity",
                0.0 if exceeded else 1.0,
                "failure" if exceeded else "success",
                f"reverify:private-gap:{r.exam}@{r.exam_version}",
            )
        )
    held_back = r.security_observed == "fail" and r.security_status != "failed"
    for p in r.private_items:
        if p.value_millis is None or (held_back and p.dimension == "security"):
            continue
        out.append(item(p.dimension, p.value_millis / 1000, p.result, f"exam:{p.exam}:{p.item_id}"))
    return out


__all__ = ["ISSUER", "SOURCE", "derive_reverification", "is_fresh", "standing", "standing_key"]
