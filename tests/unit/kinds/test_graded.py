"""Graded evidence: the server's grader key signs the re-grading of an agent's exam report."""

from __future__ import annotations

from typing import Any

import pytest

from tests.unit.evidence.signed import DIGEST, T0, Log, new_id, predicate_update, refused
from trustscore.errors import InvalidInput, SignatureError
from trustscore.kinds.graded import GRADED_EVIDENCE, GradedItem, make_graded_evidence

ITEMS = [
    GradedItem(
        item_id="cap-1", dimension="capability", grader="exact@1", value_millis=1000, result="success"
    ),
    GradedItem(
        item_id="sec-1", dimension="security", grader="injection@2", value_millis=500, result="partial"
    ),
]


def _graded(grader: str, agent: str, **kw: Any) -> bytes:
    fields: dict[str, Any] = {
        "report_index": 3,
        "report_sha256": DIGEST,
        "exam": "capability",
        "exam_version": 1,
        "exam_digest": "sha256:" + "cd" * 32,
        "tier": "public",
        "graded_at": T0,
        "items": ITEMS,
    }
    fields.update(kw)
    return make_graded_evidence(grader=grader, agent=agent, **fields)


def test_graded_evidence_is_signed_by_the_grader_about_the_agent() -> None:
    log = Log()
    grader, agent = log.service("grader", ["grader"]), log.party("agent")
    entry = log.entries[log.submit(_graded(grader.id, agent.id), grader)]
    assert entry.kind == GRADED_EVIDENCE.predicate_type
    assert (entry.signer, entry.subject) == (grader.id, agent.id)
    assert entry.statement.statement.subject[0].digest == {"sha256": DIGEST}
    with pytest.raises(SignatureError, match=f"must be signed by {grader.id}"):
        log.submit(_graded(grader.id, agent.id), agent)


def test_an_agent_cannot_grade_itself() -> None:
    me = new_id()
    with pytest.raises(InvalidInput, match="grade itself"):
        _graded(me, me)


def _item(**kw: object) -> dict[str, object]:
    item: dict[str, object] = {
        "item_id": "x-1",
        "dimension": "capability",
        "grader": "exact@1",
        "value_millis": 700,
        "result": "partial",
    }
    item.update(kw)
    return item


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"grader": "server"}, "grader"),
        ({"agent": ""}, "agent"),
        ({"report_index": -1}, "report_index"),
        ({"report_index": "3"}, "report_index"),
        ({"report_sha256": "sha256:" + DIGEST}, "report_sha256"),
        ({"exam": ""}, "exam"),
        ({"exam_version": 0}, "exam_version"),
        ({"exam_digest": DIGEST}, "exam_digest"),
        ({"tier": "secret"}, "tier"),
        ({"graded_at": "now"}, "graded_at"),
        ({"items": []}, "items"),
        ({"items": [_item(), _item()]}, "appears twice"),
        ({"items": [_item(item_id="")]}, "item_id"),
        ({"items": [_item(dimension="charisma")]}, "dimension"),
        ({"items": [_item(grader="Exact")]}, "grader"),
        ({"items": [_item(value_millis=1001)]}, "value_millis"),
        ({"items": [_item(value_millis=-1)]}, "value_millis"),
        ({"items": [_item(value_millis=0.5)]}, "value_millis"),
        ({"items": [_item(result="pass")]}, "result"),
        ({"items": [_item(note="x")]}, "note"),
        ({"score": 1}, "score"),
    ],
)
def test_graded_fields_are_checked(fields: dict[str, object], words: str) -> None:
    refused(_graded(new_id(), new_id()), predicate_update(**fields), InvalidInput, words)


def test_graded_subject_pins_the_report() -> None:
    payload = _graded(new_id(), new_id())
    refused(payload, predicate_update(report_sha256="ef" * 32), InvalidInput, "subject")
