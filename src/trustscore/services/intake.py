"""Evidence in: exam reports (re-graded by the server), settlements and marketplace events.

Nothing a client computes is trusted. A report's client-side grades are ignored: the server re-grades
every raw response with its own graders and appends, in the same transaction as the report, a graded
evidence statement signed by its grader key that points at the report's log index.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from dataclasses import dataclass

import msgspec

from trustscore.errors import Conflict
from trustscore.exams.loader import ExamDirs
from trustscore.exams.report import ExamReport, exam_for, grade_report
from trustscore.grading.model import ItemGrade
from trustscore.ledger import dsse, statements
from trustscore.ledger.graded import GradedItem, make_graded_evidence
from trustscore.ledger.keys import SigningKey
from trustscore.ledger.submission import Prepared, prepare
from trustscore.services.log import LogService
from trustscore.services.metrics import Metrics
from trustscore.store.log import Appended


@dataclass(frozen=True)
class GradedReport:
    report: Appended
    evidence: Appended
    exam: str
    grades: list[ItemGrade]


class Intake:
    def __init__(
        self, log: LogService, grader_key: SigningKey, exam_dirs: ExamDirs, metrics: Metrics
    ) -> None:
        self.log = log
        self.grader_key = grader_key
        self.exam_dirs = exam_dirs
        self.metrics = metrics

    async def report(self, body: bytes) -> GradedReport:
        """Verify, re-grade and log an exam report with the server's graded evidence (all or nothing)."""
        [prepared] = self.log.parse_body(body, kinds={"exam-report"}, single=True)
        report = prepared.statement.predicate
        assert isinstance(report, ExamReport)
        await self.log.check_prepared([prepared], batch=False)  # signature and admission before grading
        exam = exam_for(report, self.exam_dirs)
        started = time.perf_counter()
        grades = await asyncio.to_thread(grade_report, report, exam)
        self.metrics.grading_seconds.observe(time.perf_counter() - started)
        self.metrics.items_graded.inc(len(grades))
        graded_at = statements.format_time(dt.datetime.now(dt.UTC))

        def follow(first: list[Appended]) -> list[Prepared]:
            [appended] = first
            if appended.duplicate:
                raise Conflict(f"this report is already in the log as entry {appended.index}")
            payload = make_graded_evidence(
                grader=self.grader_key.id,
                agent=report.agent,
                report_index=appended.index,
                report_sha256=prepared.statement_hash.hex(),
                exam=report.exam,
                exam_version=report.exam_version,
                exam_digest=report.exam_digest,
                tier=exam.file.tier,
                graded_at=graded_at,
                items=[
                    GradedItem(
                        item_id=g.item_id,
                        dimension=g.dimension,
                        grader=g.grader,
                        value_millis=g.grade.value,
                        result=g.grade.result,
                    )
                    for g in grades
                ],
            )
            envelope = dsse.sign(payload, [self.grader_key])
            return [prepare(msgspec.to_builtins(envelope))]

        rep, ev = await self.log.append([prepared], batch=False, follow=follow)
        return GradedReport(rep, ev, exam.id, grades)

    async def settlement(self, body: bytes) -> Appended:
        prepared = self.log.parse_body(body, kinds={"settlement"}, single=True)
        [appended] = await self.log.append(prepared, batch=False)
        return appended

    async def event(self, body: bytes) -> Appended:
        prepared = self.log.parse_body(body, kinds={"event"}, single=True)
        [appended] = await self.log.append(prepared, batch=False)
        return appended
