"""The scoring evidence of ``work-record/v1``, called from ``evidence/derive.py`` (docs/evidence-ladder.md).

Who may report a work record (the agent's own interest, or another's confirming party) is an admission
rule in ``kinds/admission.py``.

Evidence: one ``delivery`` item per record at rung ≥ 1 under :data:`~trustscore.ladder.rule.SCORING_RULE`:
result ``success`` for a ``done`` claim, ``partial`` for ``partial`` or ``unknown``; source ``real``
when confirmed, ``self-reported`` when self-attested; key ``work:{reporter}:{task_ref}`` (a reporter's
later record of a task corrects its earlier one); issuer the reporter; ``extra_weight`` =
:func:`~trustscore.ladder.rule.weight`. A rung-0 record (unflown, or a claimed failure) carries no
scoring evidence; it still has a ladder row.
"""

from __future__ import annotations

from collections.abc import Callable

from trustscore.kinds.work_records import WorkRecord
from trustscore.ladder.rule import SCORING_RULE, UNFLOWN, rung_of, weight
from trustscore.ledger.statements import parse_time
from trustscore.scoring.inputs import DerivedEvidence

#: The source of a self-attested record's item (``real`` when confirmed): always pooled since standing-v2.
SELF_REPORTED = "self-reported"


def derive_work_record(
    index: int, w: WorkRecord, reporter_weight: Callable[[str, int], float]
) -> list[DerivedEvidence]:
    """The scoring evidence of the admitted work record logged at ``index`` (module docstring)."""

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
            source="real" if w.attestation == "confirmed" else SELF_REPORTED,
            at=parse_time(w.finished_at, what="finished_at"),
            value=1.0 if done else 0.5,
            result="success" if done else "partial",
            key=f"work:{w.reporter}:{w.task_ref}",
            issuer=w.reporter,
            extra_weight=weight(r.rung, w.attestation, rw),
        )
    ]
