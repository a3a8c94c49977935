"""The exam report: a signed in-toto statement of kind ``exam-report/v1``.

It holds the exam set id, version and digest, the grader versions, the agent's key id and public key,
timing, and every item's raw responses (for dialogues, the agent's moves; the counterpart's are
re-derived by the grader). Client-side grades are information only: ``exams/reporting.py`` re-grades.

Signer and subject are the agent's key id. The subject digest is the SHA-256 of the canonical encoding
of the ``items`` list, so the subject pins exactly the responses the report carries. All numbers are
integers (milliseconds, grades in millis).
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

import msgspec

from trustscore import canonical
from trustscore.errors import InvalidInput, NotFound, PayloadTooLarge, VerificationError
from trustscore.grading import Turn
from trustscore.grading.model import Result
from trustscore.ledger import dsse, keys, statements
from trustscore.ledger.statements import Facts, Kind, Predicate, Statement, Subject

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_GRADER = re.compile(r"^[a-z][a-z0-9-]{0,63}@[1-9][0-9]{0,5}$")
MAX_ITEMS = 10_000
MAX_REPORT_BYTES = 4 * 1024 * 1024  # a whole submitted report (43 items of long answers fit easily)
MAX_ANSWER_BYTES = 64 * 1024  # one turn's output (UTF-8)
MAX_TURNS = 64  # turns of one item (the longest dialogue asks 8)


class ReportItem(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """One item's raw responses, with the client-side grade (information only)."""

    item_id: str
    turns: list[Turn]
    error: str | None
    client_grade: int
    client_result: Result


class ExamReport(Predicate, kw_only=True, frozen=True):
    agent: str
    public_key: str  # base64 of the agent's raw Ed25519 key, so a report verifies offline
    exam: str
    exam_version: int
    exam_digest: str
    graders: list[str]
    adapter: str
    sdk_version: str
    started_at: str
    elapsed_ms: int
    items: list[ReportItem]


def items_digest(items: list[ReportItem]) -> str:
    return hashlib.sha256(canonical.encode(items)).hexdigest()


def report_subject(agent: str, items: list[ReportItem]) -> Subject:
    return Subject(name=agent, digest={"sha256": items_digest(items)})


def _check(stmt: Statement, r: ExamReport) -> Facts:
    public = canonical.b64decode(r.public_key, what="public_key")
    if len(public) != 32 or keys.key_id(public) != r.agent:
        raise InvalidInput("exam report: public_key does not match the agent id")
    if stmt.subject != [report_subject(r.agent, r.items)]:
        raise InvalidInput("exam report: subject must be the agent id and the SHA-256 of its items")
    if not _DIGEST.match(r.exam_digest):
        raise InvalidInput("exam report: exam_digest must be sha256:<64 hex>")
    statements.check_text(r.exam, what="exam")
    statements.check_text(r.adapter, what="adapter", max_len=2048)
    statements.check_text(r.sdk_version, what="sdk_version")
    statements.parse_time(r.started_at, what="started_at")
    if r.exam_version < 1 or r.elapsed_ms < 0:
        raise InvalidInput("exam report: exam_version must be >= 1 and elapsed_ms >= 0")
    if r.graders != sorted(set(r.graders)) or not all(_GRADER.match(g) for g in r.graders):
        raise InvalidInput("exam report: graders must be sorted, distinct name@version references")
    if not r.items or len(r.items) > MAX_ITEMS:
        raise InvalidInput(f"exam report: needs 1..{MAX_ITEMS} items")
    ids = [i.item_id for i in r.items]
    if len(set(ids)) != len(ids):
        raise InvalidInput("exam report: an item id appears twice")
    for i in r.items:
        if not 0 <= i.client_grade <= 1000 or any(t.elapsed_ms < 0 for t in i.turns):
            raise InvalidInput(f"exam report: item {i.item_id}: grade must be 0..1000 and times >= 0")
        _check_bounds(i)
    return Facts(signer=r.agent, subject=r.agent)


def _check_bounds(i: ReportItem) -> None:
    statements.check_text(i.item_id, what="item_id")
    if i.error is not None and len(i.error) > 2048:
        raise PayloadTooLarge(f"exam report: item {i.item_id}: error may be at most 2048 characters")
    if len(i.turns) > MAX_TURNS:
        raise PayloadTooLarge(f"exam report: item {i.item_id}: at most {MAX_TURNS} turns, got {len(i.turns)}")
    for n, t in enumerate(i.turns):
        if len(t.output) > MAX_ANSWER_BYTES or len(t.output.encode()) > MAX_ANSWER_BYTES:
            raise PayloadTooLarge(
                f"exam report: item {i.item_id} turn {n}: an answer may be at most {MAX_ANSWER_BYTES} bytes"
            )


EXAM_REPORT = statements.register(Kind(name="exam-report", version=1, struct=ExamReport, check=_check))


def sdk_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"trustscore {version('trustscore')}"
    except PackageNotFoundError:
        return "trustscore (source)"


@dataclass(frozen=True)
class VerifiedReport:
    envelope: dsse.Envelope
    payload: bytes
    report: ExamReport


def open_report(raw: object) -> VerifiedReport:
    """Check an envelope (already-parsed JSON) holding an exam report: structure, kind and signature."""
    env = dsse.decode_envelope(raw)
    parsed = statements.parse_statement(canonical.b64decode(env.payload, what="payload"))
    if parsed.kind is not EXAM_REPORT:
        raise InvalidInput(f"not an exam report but a {parsed.kind.predicate_type} statement")
    report = parsed.predicate
    assert isinstance(report, ExamReport)
    public = canonical.b64decode(report.public_key, what="public_key")
    verified = dsse.verify_envelope(env, lambda kid: public if kid == report.agent else None)
    if verified.signer_ids != (report.agent,):
        raise VerificationError("exam report must be signed by its agent's key alone")
    return VerifiedReport(env, verified.payload, report)


def read_report(path: Path) -> VerifiedReport:
    try:
        raw = json.loads(path.read_bytes())
    except FileNotFoundError as exc:
        raise NotFound(f"report {path} does not exist") from exc
    except (OSError, ValueError) as exc:
        raise InvalidInput(f"report {path} is not JSON") from exc
    return open_report(raw)


def write_report(path: Path, envelope: dsse.Envelope) -> None:
    path.write_bytes(msgspec.json.format(msgspec.json.encode(envelope), indent=2) + b"\n")
