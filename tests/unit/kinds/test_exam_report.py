"""The exam-report statement kind: round trip, strict re-grading and named errors for bad reports."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest

from trustscore import canonical
from trustscore.errors import InvalidInput, NotFound, SignatureError, UnsupportedKind, VerificationError
from trustscore.exams.loader import DEFAULT_PUBLIC_DIR, ExamDirs, load_exam
from trustscore.exams.reporting import build_report, exam_for, grade_report
from trustscore.grading import Turn
from trustscore.kinds.exam_report import (
    EXAM_REPORT,
    ExamReport,
    ReportItem,
    open_report,
    read_report,
    write_report,
)
from trustscore.ledger import dsse, keys, statements

DIRS = ExamDirs(DEFAULT_PUBLIC_DIR, None)
KEY = keys.SigningKey.from_seed(bytes(range(32)))


def _items(answer: str = "ANSWER: 112") -> list[ReportItem]:
    exam = load_exam("reliability@1", DIRS)
    return [ReportItem(i.id, [Turn(answer, 3)] * 3, None, 0, "failure") for i in exam.items]


def _envelope(items: list[ReportItem] | None = None, exam_ref: str = "reliability@1") -> dsse.Envelope:
    exam = load_exam(exam_ref, DIRS)
    return build_report(
        exam,
        items or _items(),
        adapter="python:test",
        started_at="2026-01-01T00:00:00Z",
        elapsed_ms=5,
        key=KEY,
    )


def _raw(env: dsse.Envelope) -> object:
    return json.loads(msgspec.json.encode(env))


def test_round_trip_and_regrade() -> None:
    verified = open_report(_raw(_envelope()))
    r = verified.report
    assert r.agent == KEY.id
    assert r.exam == "reliability" and r.exam_version == 1
    assert r.graders == ["agreement@1"]
    grades = grade_report(r, exam_for(r, DIRS))
    assert [g.grade.value for g in grades][:1] == [1000]
    parsed = statements.parse_statement(verified.payload)
    assert parsed.kind is EXAM_REPORT
    assert parsed.facts.signer == parsed.facts.subject == KEY.id


def test_file_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "r.json"
    write_report(path, _envelope())
    assert read_report(path).report.agent == KEY.id


def test_tampered_payload_fails_signature() -> None:
    raw = _raw(_envelope())
    assert isinstance(raw, dict)
    payload = canonical.b64decode(raw["payload"])
    raw["payload"] = canonical.b64encode(payload.replace(b"ANSWER: 112", b"ANSWER: 113", 1))
    with pytest.raises((SignatureError, InvalidInput)) as info:
        open_report(raw)
    assert "does not verify" in info.value.message or "subject" in info.value.message


def test_tampered_payload_with_fixed_subject_fails_signature() -> None:
    env = _envelope()
    stmt = json.loads(canonical.b64decode(env.payload))
    stmt["predicate"]["elapsed_ms"] = 1
    raw = _raw(env)
    assert isinstance(raw, dict)
    raw["payload"] = canonical.b64encode(canonical.encode(stmt))
    with pytest.raises(SignatureError, match=f"signature by {KEY.id} does not verify"):
        open_report(raw)


def test_report_signed_by_another_key() -> None:
    env = _envelope()
    other = keys.SigningKey.from_seed(bytes(32))
    forged = dsse.sign(canonical.b64decode(env.payload), [other])
    with pytest.raises(VerificationError):
        open_report(_raw(forged))


def test_not_an_envelope() -> None:
    with pytest.raises(InvalidInput, match="not a DSSE envelope"):
        open_report({"hello": 1})


def test_other_statement_kind_rejected() -> None:
    from trustscore.kinds.cards import AGENT_CARD, AgentCard, card_subject

    card = AgentCard(
        nonce="n" * 16,
        issued_at="2026-01-01T00:00:00Z",
        public_key=canonical.b64encode(KEY.public_key),
        name="x",
    )
    env = dsse.sign(statements.make_statement(AGENT_CARD, card_subject(KEY.public_key), card), [KEY])
    with pytest.raises(InvalidInput, match="not an exam report"):
        open_report(_raw(env))


def _report(**changes: object) -> ExamReport:
    r = open_report(_raw(_envelope())).report
    return msgspec.structs.replace(r, **changes)


def test_unknown_item_id_is_named() -> None:
    r = _report()
    r = msgspec.structs.replace(r, items=[*r.items, ReportItem("rel-999", [], None, 0, "failure")])
    with pytest.raises(InvalidInput, match="item 'rel-999', which is not in reliability@1"):
        grade_report(r, load_exam("reliability@1", DIRS))


def test_missing_item_is_named() -> None:
    r = _report()
    r = msgspec.structs.replace(r, items=r.items[1:])
    with pytest.raises(InvalidInput, match="no response for item 'rel-001'"):
        grade_report(r, load_exam("reliability@1", DIRS))


def test_unknown_exam_version() -> None:
    with pytest.raises(NotFound, match="report is for exam reliability@7, which is not available here"):
        exam_for(_report(exam_version=7), DIRS)


def test_digest_mismatch_names_both() -> None:
    bad = "sha256:" + "0" * 64
    with pytest.raises(VerificationError, match=f"digest {bad}"):
        exam_for(_report(exam_digest=bad), DIRS)
    with pytest.raises(VerificationError):
        grade_report(_report(exam_digest=bad), load_exam("reliability@1", DIRS))


def test_report_for_other_exam() -> None:
    with pytest.raises(InvalidInput, match="not delivery@1"):
        grade_report(_report(), load_exam("delivery@1", DIRS))


def test_unknown_grader_in_report() -> None:
    with pytest.raises(UnsupportedKind, match="agreement@9"):
        grade_report(_report(graders=["agreement@9"]), load_exam("reliability@1", DIRS))


def test_statement_checks() -> None:
    env = _envelope()
    stmt = json.loads(canonical.b64decode(env.payload))
    stmt["subject"][0]["digest"]["sha256"] = "0" * 64
    with pytest.raises(InvalidInput, match="subject must be the agent id"):
        statements.parse_statement(canonical.encode(stmt))
    stmt = json.loads(canonical.b64decode(env.payload))
    stmt["predicate"]["agent"] = "ts1_" + "0" * 40
    with pytest.raises(InvalidInput, match="public_key does not match"):
        statements.parse_statement(canonical.encode(stmt))
    stmt = json.loads(canonical.b64decode(env.payload))
    stmt["predicate"]["items"][0]["client_grade"] = 0.5
    with pytest.raises(InvalidInput):
        statements.parse_statement(json.dumps(stmt).encode())
