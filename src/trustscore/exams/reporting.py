"""The exam side of an exam report: sign one made with an exam set, find a report's exam, re-grade it.

The report itself (struct, check, envelope) is the ``exam-report/v1`` statement kind in
``kinds/exam_report.py``; what needs the exam sets and graders lives here, one layer above.
"""

from __future__ import annotations

import datetime as dt
import secrets

from trustscore import canonical
from trustscore.errors import InvalidInput, NotFound, VerificationError
from trustscore.exams.loader import ExamDirs, load_exam
from trustscore.exams.model import ExamSet
from trustscore.grading import ItemGrade, Response, get_grader, grade_item
from trustscore.kinds.exam_report import EXAM_REPORT, ExamReport, ReportItem, report_subject, sdk_version
from trustscore.ledger import dsse, keys, statements


def build_report(
    exam: ExamSet,
    items: list[ReportItem],
    *,
    adapter: str,
    started_at: str,
    elapsed_ms: int,
    key: keys.SigningKey,
) -> dsse.Envelope:
    """Sign a report of ``items`` (responses to ``exam``) with the agent's key."""
    by_id = {i.id: i for i in exam.items}
    predicate = ExamReport(
        nonce=secrets.token_hex(16),
        issued_at=statements.format_time(dt.datetime.now(dt.UTC)),
        agent=key.id,
        public_key=canonical.b64encode(key.public_key),
        exam=exam.name,
        exam_version=exam.version,
        exam_digest=exam.digest,
        graders=sorted({by_id[i.item_id].grader for i in items}),
        adapter=adapter[:2048],
        sdk_version=sdk_version(),
        started_at=started_at,
        elapsed_ms=elapsed_ms,
        items=items,
    )
    payload = statements.make_statement(EXAM_REPORT, report_subject(key.id, items), predicate)
    return dsse.sign(payload, [key])


def exam_for(report: ExamReport, dirs: ExamDirs) -> ExamSet:
    """The exam set a report was made with; its digest must match the report's."""
    ref = f"{report.exam}@{report.exam_version}"
    try:
        exam = load_exam(ref, dirs)
    except NotFound as exc:
        raise NotFound(f"report is for exam {ref}, which is not available here") from exc
    if exam.digest != report.exam_digest:
        raise VerificationError(
            f"report was made with {ref} digest {report.exam_digest}, but the exam set here has {exam.digest}"
        )
    return exam


def grade_report(report: ExamReport, exam: ExamSet) -> list[ItemGrade]:
    """Re-grade every response in ``report`` with ``exam``'s graders; pure, strict about item ids."""
    if (report.exam, report.exam_version) != (exam.name, exam.version):
        raise InvalidInput(f"report is for {report.exam}@{report.exam_version}, not {exam.id}")
    if report.exam_digest != exam.digest:
        raise VerificationError(
            f"report exam digest {report.exam_digest} differs from {exam.id} {exam.digest}"
        )
    by_id = {i.id: i for i in exam.items}
    for ri in report.items:
        if ri.item_id not in by_id:
            raise InvalidInput(f"report has a response for item {ri.item_id!r}, which is not in {exam.id}")
    answered = {ri.item_id for ri in report.items}
    missing = [i.id for i in exam.items if i.id not in answered]
    if missing:
        raise InvalidInput(f"report has no response for item {missing[0]!r} of {exam.id}")
    for ref in report.graders:
        get_grader(ref)
    grades = []
    for ri in report.items:
        item = by_id[ri.item_id]
        grade = grade_item(item, Response(ri.turns, ri.error))
        grades.append(ItemGrade(item.id, item.dimension, item.grader, grade))
    return grades
