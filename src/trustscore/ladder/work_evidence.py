"""The scoring evidence of ``work-record/v1``, called from ``evidence/derive.py`` (docs/evidence-ladder.md).

Who may report a work record (the agent's own interest, or another's confirming party) is an admission
rule in ``kinds/admission.py``. How a record becomes evidence is a versioned derivation (:data:`VERSION`,
named in every rating response and evidence export): a released version never changes.

``work-evidence@1`` (until 2026-12-07, :func:`derive_v1`): one ``delivery`` item per record at rung ≥ 1
under :data:`~trustscore.ladder.rule.SCORING_RULE`: result ``success`` for a ``done`` claim, ``partial``
for ``partial`` or ``unknown``; source ``real`` when confirmed, ``self-reported`` when self-attested; key
``work:{reporter}:{task_ref}`` (a reporter's later record of a task corrects its earlier one); issuer the
reporter; ``extra_weight`` = :func:`~trustscore.ladder.rule.weight`. A rung-0 record (unflown, or a
claimed failure) carries no scoring evidence; it still has a ladder row.

``work-evidence@2`` (:func:`derive_work_record`) is ``@1`` where the record shows no failure; where it
does (:func:`failure_rung`: red CI, PR or deployment, a red last run, or a ``failed`` claim), one
``failure`` item (value 0) weighing the evidence that showed it, whatever the record claims. Under
``@1`` a CI party's record of failed work left no evidence at all, and one of work claimed done whose CI
confirmation or last test run was red counted as a success: reported failures could only be absent,
never count (found by an adversarial review, 2026-12-07).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from trustscore.kinds.work_records import WorkRecord
from trustscore.ladder.rule import (
    CI_VERIFIED,
    DONE_CLAIMED,
    SCORING_RULE,
    TEST_OR_BUILD_PASSED,
    UNFLOWN,
    rung_of,
    weight,
)
from trustscore.ledger.statements import parse_time
from trustscore.scoring.inputs import DerivedEvidence, Result

#: The derivation's version, named in every rating response and evidence export.
VERSION: Final = "work-evidence@2"
#: The source of a self-attested record's item (``real`` when confirmed): always pooled since standing-v2.
SELF_REPORTED = "self-reported"

ReporterWeight = Callable[[str, int], float]


def failure_rung(w: WorkRecord) -> int | None:
    """How strong the record's evidence that the work failed is, as the rung whose weight it gets; None
    when the record shows no failure (``work-evidence@2``). The evidence decides, whatever the claim:

    * a kind of confirmation (CI, PR, deployment) whose newest decided status is ``failure``: rung 5's
      weight, as a success there weighs (a red deployment after green CI is a failure; green CI after red
      CI is not);
    * else, unless a confirmation is green, a red newest captured test or build run: rung 3's weight, as
      a green run's;
    * else a ``failed`` claim, the reporter's own word: rung 1's, as a ``done`` claim's."""
    newest: dict[str, str] = {}
    for c in w.confirmations:
        if c.status != "pending":
            newest[c.kind] = c.status
    if "failure" in newest.values():
        return CI_VERIFIED
    if not newest:
        captured = [r for r in w.runs if r.exit_code is not None]
        if captured and captured[-1].exit_code != 0:
            return TEST_OR_BUILD_PASSED
    return DONE_CLAIMED if w.claimed_outcome == "failed" else None


def derive_work_record(index: int, w: WorkRecord, reporter_weight: ReporterWeight) -> list[DerivedEvidence]:
    """The scoring evidence of the admitted work record logged at ``index`` under :data:`VERSION`."""
    failed = failure_rung(w)
    if failed is None:
        return derive_v1(index, w, reporter_weight)
    return [
        _item(index, w, 0.0, "failure", weight(failed, w.attestation, _attester(index, w, reporter_weight)))
    ]


def derive_v1(index: int, w: WorkRecord, reporter_weight: ReporterWeight) -> list[DerivedEvidence]:
    """The scoring evidence of the record under ``work-evidence@1`` (module docstring)."""
    r = rung_of(w, SCORING_RULE)
    if r.rung == UNFLOWN:
        return []
    done = w.claimed_outcome == "done"
    return [
        _item(
            index,
            w,
            1.0 if done else 0.5,
            "success" if done else "partial",
            weight(r.rung, w.attestation, _attester(index, w, reporter_weight)),
        )
    ]


def _attester(index: int, w: WorkRecord, reporter_weight: ReporterWeight) -> float:
    return 1.0 if w.attestation == "self" else reporter_weight(w.reporter, index)


def _item(index: int, w: WorkRecord, value: float, result: Result, extra_weight: float) -> DerivedEvidence:
    return DerivedEvidence(
        index=index,
        agent=w.agent,
        dimension="delivery",
        source="real" if w.attestation == "confirmed" else SELF_REPORTED,
        at=parse_time(w.finished_at, what="finished_at"),
        value=value,
        result=result,
        key=f"work:{w.reporter}:{w.task_ref}",
        issuer=w.reporter,
        extra_weight=extra_weight,
    )
