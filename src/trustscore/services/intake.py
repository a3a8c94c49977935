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

from trustscore.errors import Conflict, InvalidInput, NonceReplay, PayloadTooLarge, TrustscoreError
from trustscore.exams.identity import graded_nonce
from trustscore.exams.loader import ExamDirs
from trustscore.exams.model import ExamSet
from trustscore.exams.reporting import exam_for, grade_report
from trustscore.grading import sandbox
from trustscore.grading.model import Grade, ItemGrade
from trustscore.kinds.exam_report import MAX_REPORT_BYTES, ExamReport
from trustscore.kinds.graded import GradedEvidence, GradedItem, make_graded_evidence
from trustscore.ledger import audit, dsse, statements
from trustscore.ledger.keys import SigningKey
from trustscore.ledger.submission import Prepared, prepare
from trustscore.services.coalesce import Coalescer
from trustscore.services.grading_queue import GradingQueue, QueueLimits
from trustscore.services.log import LogService
from trustscore.services.metrics import Metrics
from trustscore.store.log import Appended, NonceProbe, StoredEntry


@dataclass(frozen=True)
class GradedReport:
    report: Appended
    evidence: Appended
    exam: str
    grades: list[ItemGrade]

    @property
    def duplicate(self) -> bool:
        return self.report.duplicate


class Intake:
    def __init__(
        self,
        log: LogService,
        grader_key: SigningKey,
        exam_dirs: ExamDirs,
        metrics: Metrics,
        *,
        grading: QueueLimits | None = None,
        clock_skew: float = 300.0,
    ) -> None:
        self.log = log
        # Every report's two questions before grading, asked for the reports arriving together in one
        # round trip (the probe alone was 14 % of the server's GIL-held time: bench/README.md, "Report
        # ingest, session 24").
        self._probes = Coalescer[NonceProbe, tuple[int | None, bool]](
            lambda p: self.log.store.nonce_probes(p)
        )
        self.grader_key = grader_key
        self.exam_dirs = exam_dirs
        self.metrics = metrics
        self.grading = GradingQueue(grading)
        self.clock_skew = dt.timedelta(seconds=clock_skew)

    async def report(self, body: bytes, address: str | None = None) -> GradedReport:
        """Verify, re-grade and log an exam report with the server's graded evidence (all or nothing).

        Everything cheap is checked before grading (which runs sandboxed code): signature, admission,
        the signer's rate limit, a replay, the exam version and digest, and that the set is public.
        """
        try:
            return await self._report(body, address)
        except TrustscoreError as exc:
            self.metrics.submissions_refused.labels(exc.code).inc()
            self.log.refused(address)
            raise

    async def _report(self, body: bytes, address: str | None) -> GradedReport:
        if len(body) > MAX_REPORT_BYTES:
            raise PayloadTooLarge(f"an exam report may be at most {MAX_REPORT_BYTES} bytes, got {len(body)}")
        [prepared] = self.log.parse_body(body, kinds={"exam-report"}, single=True)
        report = prepared.statement.predicate
        assert isinstance(report, ExamReport)
        checked = await self.log.check_prepared([prepared], batch=False)
        self._claimed(report.issued_at, "issued_at")
        # A report is its answers, not its nonce: the same answers again are the first report (issue #10).
        nonce = graded_nonce(report)
        # Both questions in one round trip, shared with the reports asking meanwhile; the answers count
        # in this order.
        probe = (self.grader_key.id, nonce, report.agent, report.nonce)
        index, used = (await self._probes.get([probe]))[probe]
        graded = None if index is None else await self.log.store.entry_at(index)
        if graded is not None:
            return await self._first_graded(graded)
        if used:
            raise NonceReplay(f"nonce {report.nonce!r} of {report.agent} was already used")
        exam = exam_for(report, self.exam_dirs)
        if exam.file.tier != "public":
            raise InvalidInput(f"{exam.id} is not a public exam set; the server asks private items itself")
        self.log.charge([report.agent], address)
        async with self.grading.slot(report.agent, address):
            started = time.perf_counter()
            grades = await asyncio.to_thread(self._grade, report, exam)
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
                nonce=nonce,
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

        try:
            rep, ev = await self.log.append_checked(checked, follow=follow, charged=True)
        except Conflict:
            # The same answers were logged meanwhile by a concurrent request (its report is this one, or
            # took this nonce): that one is the report.
            first = await self._graded_before(nonce)
            if first is None:
                raise
            return first
        self.metrics.ingest_seconds.labels("reports").observe(time.perf_counter() - started)
        return GradedReport(rep, ev, exam.id, grades)

    async def _graded_before(self, nonce: str) -> GradedReport | None:
        """The report already logged with these answers (its graded evidence carries ``nonce``), if any."""
        found = await self.log.store.entry_by_nonce(self.grader_key.id, nonce)
        return None if found is None else await self._first_graded(found)

    async def _first_graded(self, found: StoredEntry) -> GradedReport:
        """The report that the logged graded evidence ``found`` grades, as first graded."""
        graded = audit.parse_leaf(found.leaf).statement.predicate
        assert isinstance(graded, GradedEvidence)
        [report_entry] = await self.log.store.entries(graded.report_index, graded.report_index + 1)
        grades = [
            ItemGrade(i.item_id, i.dimension, i.grader, Grade(i.value_millis, i.result, "as first graded"))
            for i in graded.items
        ]
        return GradedReport(
            Appended(report_entry.index, report_entry.leaf_hash, True),
            Appended(found.index, found.leaf_hash, True),
            f"{graded.exam}@{graded.exam_version}",
            grades,
        )

    def _grade(self, report: ExamReport, exam: ExamSet) -> list[ItemGrade]:
        with sandbox.budget(self.grading.limits.report_budget_s):
            return grade_report(report, exam)

    async def settlement(self, body: bytes, address: str | None = None) -> Appended:
        return await self._simple(body, "settlement", "settled_at", address)

    async def event(self, body: bytes, address: str | None = None) -> Appended:
        return await self._simple(body, "event", "occurred_at", address)

    async def work_record(self, body: bytes, address: str | None = None) -> Appended:
        return await self._simple(body, "work-record", "finished_at", address)  # docs/evidence-ladder.md

    async def _simple(self, body: bytes, kind: str, when: str, address: str | None) -> Appended:
        started = time.perf_counter()
        try:
            prepared = self.log.parse_body(body, kinds={kind}, single=True)
            predicate = prepared[0].statement.predicate
            self._claimed(predicate.issued_at, "issued_at")
            self._claimed(getattr(predicate, when), when)
            [appended] = await self.log.append(prepared, batch=False, address=address)
        except TrustscoreError as exc:
            self.metrics.submissions_refused.labels(exc.code).inc()
            self.log.refused(address)
            raise
        self.metrics.ingest_seconds.labels(kind).observe(time.perf_counter() - started)
        return appended

    def _claimed(self, text: str, what: str) -> None:
        """Refuse times ahead of the server's clock or before the epoch (statements.check_claimed_time)."""
        statements.check_claimed_time(text, what=what, latest=dt.datetime.now(dt.UTC) + self.clock_skew)
