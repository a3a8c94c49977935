"""A report's identity is what it answers, not how it was signed (issue #10, docs/service.md).

Two reports by the same agent to the same exam version with the same responses are one report, whatever
their nonces, timings or client-side grades: the server grades and logs it once. The identity is carried
in the log as the nonce of the server's graded evidence for the report (:func:`graded_nonce`), so the
log's unique (signer, nonce) index enforces "once" atomically, and anyone replaying the log can see it.
"""

from __future__ import annotations

import hashlib

from trustscore import canonical
from trustscore.kinds.exam_report import ExamReport, ReportItem

#: Prefix of the graded-evidence nonce that names a report's identity.
NONCE_PREFIX = "report:"


def responses_digest(items: list[ReportItem]) -> str:
    """SHA-256 hex of the responses alone: per item (sorted by id) its outputs and error, no timings or
    client grades, so re-timing or re-grading the same answers does not make a new report."""
    plain = sorted([i.item_id, [t.output for t in i.turns], i.error] for i in items)
    return hashlib.sha256(canonical.encode(plain)).hexdigest()


def report_identity(report: ExamReport) -> str:
    """SHA-256 hex of (agent, exam, exam version, responses digest)."""
    key = [report.agent, report.exam, report.exam_version, responses_digest(report.items)]
    return hashlib.sha256(canonical.encode(key)).hexdigest()


def graded_nonce(report: ExamReport) -> str:
    """The nonce of the server's graded evidence for ``report`` (71 printable ASCII characters)."""
    return NONCE_PREFIX + report_identity(report)
