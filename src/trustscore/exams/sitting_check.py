"""Recompute a closed sitting from its log entries alone and compare with the server's grades, purely.

``trustscore exam check-sitting`` fetches the entries (request, open, report, close), verifies their
inclusion, signatures and the root, and then calls :func:`check_sitting`.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from trustscore.errors import VerificationError
from trustscore.exams.forms import check_form, instantiate, items_digest, sitting_seed
from trustscore.exams.sitting_grading import expired_grades, grade_sitting
from trustscore.grading import ItemGrade
from trustscore.kinds.sittings import SittingClose, SittingOpen, SittingReport, SittingRequest


@dataclass(frozen=True)
class CheckedSitting:
    seed: bytes
    items: int
    grades: list[ItemGrade]


def check_sitting(
    request: SittingRequest,
    request_sha256: str,
    opened: SittingOpen,
    open_index: int,
    close: SittingClose,
    report: SittingReport | None,
    report_sha256: str | None,
) -> CheckedSitting:
    """Raise :class:`VerificationError` unless the close follows from the other statements. The caller
    has verified that ``close.root`` is the log's root at ``open_index + 1``."""

    def need(ok: bool, what: str) -> None:
        if not ok:
            raise VerificationError(f"sitting {open_index}: {what}")

    need(opened.request_sha256 == request_sha256, "the sitting-open names another request")
    need((opened.agent, opened.exam) == (request.agent, request.exam), "the open differs from the request")
    need(close.sitting == open_index and close.agent == opened.agent, "the close names another sitting")
    need(close.exam == opened.exam, "the close names another exam")
    need(close.service == opened.service, "opened and closed by different service keys")
    need(close.commitment == opened.commitment, "the close's commitment differs from the open's")
    secret = bytes.fromhex(close.secret)
    need(hashlib.sha256(secret).hexdigest() == opened.commitment, "the revealed secret breaks the commitment")
    check_form(opened.form)
    seed = sitting_seed(secret, bytes.fromhex(close.root), bytes.fromhex(request_sha256))
    items = instantiate(opened.form, seed)
    need(items_digest(items) == close.items_digest, "the regenerated items differ from the server's")
    if close.outcome == "reported":
        need(report is not None and report_sha256 == close.report_sha256, "the close names another report")
        assert report is not None
        need(
            report.sitting == open_index and report.agent == opened.agent, "the report is for another sitting"
        )
        need(report.commitment == opened.commitment, "the report is bound to another sitting's commitment")
        grades = grade_sitting(items, report.items, close.dialogues)
    else:
        need(report is None, "an expired sitting has no report")
        grades = expired_grades(items)
    ours = [(g.item_id, g.dimension, g.grader, g.grade.value, g.grade.result) for g in grades]
    theirs = [(i.item_id, i.dimension, i.grader, i.value_millis, i.result) for i in close.items]
    for a, b in zip(ours, theirs, strict=False):
        need(a == b, f"item {a[0]}: recomputed {a[3]} {a[4]}, the server logged {b[3]} {b[4]} ({b[0]})")
    need(len(ours) == len(theirs), f"{len(ours)} items recomputed, the server logged {len(theirs)}")
    return CheckedSitting(seed, len(items), grades)
