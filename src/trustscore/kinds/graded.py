"""Graded evidence: the server's signed result of re-grading an agent's exam report.

The agent's ``exam-report/v1`` carries raw responses and client-side grades (information only); the
server re-grades them and logs this statement with its grader key. It names the report by log index and
payload hash, and the exam set by name, version and digest (the same forms the report uses), so anyone
can re-run the graders and compare. One statement covers one tier (public or private) of one report.
"""

from __future__ import annotations

import re
from typing import Literal

import msgspec

from trustscore.errors import InvalidInput
from trustscore.kinds.parties import check_key_id, check_sha256_hex, new_nonce, now
from trustscore.ledger import statements
from trustscore.ledger.statements import Facts, Kind, Predicate, Statement, Subject, check_text, register

#: The eight dimensions of the methodology (docs/methodology.md); an item is about exactly one.
DIMENSIONS = (
    "capability",
    "reliability",
    "delivery",
    "economic",
    "collaboration",
    "security",
    "negotiation",
    "integrity",
)
MAX_ITEMS = 10_000
GradeResult = Literal["success", "partial", "failure"]
Tier = Literal["public", "private"]
EXAM_DIGEST = re.compile(r"sha256:[0-9a-f]{64}", re.ASCII)
GRADER_REF = re.compile(r"[a-z][a-z0-9-]{0,63}@[1-9][0-9]{0,5}", re.ASCII)


class GradedItem(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    item_id: str
    dimension: str  # one of DIMENSIONS
    grader: str  # name@version
    value_millis: int  # 0..1000
    result: GradeResult


class GradedEvidence(Predicate, kw_only=True, frozen=True):
    grader: str  # key id of the server's grader key; the signer
    agent: str  # key id of the agent whose report was graded; the subject
    report_index: int  # log index of the exam report
    report_sha256: str  # SHA-256 hex of the report statement's payload bytes
    exam: str
    exam_version: int  # as in the exam report
    exam_digest: str  # sha256:<64 hex>, as in the exam report
    tier: Tier
    graded_at: str
    items: list[GradedItem]


def graded_subject(agent: str, report_sha256: str) -> Subject:
    return Subject(name=agent, digest={"sha256": report_sha256})


def check_graded_item(i: GradedItem) -> None:
    check_text(i.item_id, what="items[].item_id")
    if i.dimension not in DIMENSIONS:
        raise InvalidInput(f"items[{i.item_id}].dimension must be one of {', '.join(DIMENSIONS)}")
    if not GRADER_REF.fullmatch(i.grader):
        raise InvalidInput(f"items[{i.item_id}].grader must be a name@version reference")
    if not 0 <= i.value_millis <= 1000:
        raise InvalidInput(f"items[{i.item_id}].value_millis must be 0..1000")


def check_report_ref(
    issuer: tuple[str, str],
    agent: str,
    report_index: int,
    report_sha256: str,
    exam: str,
    exam_version: int,
    exam_digest: str,
    *,
    itself: str,
) -> None:
    """The fields by which a server statement (graded evidence, a re-verification) names the report it
    is about; ``issuer`` is (field name, key id) of the server key, which may not be the agent."""
    what, issuer_id = issuer
    check_key_id(issuer_id, what=what)
    check_key_id(agent, what="agent")
    if issuer_id == agent:
        raise InvalidInput(f"agent must differ from {what} (an agent cannot {itself})")
    if report_index < 0:
        raise InvalidInput("report_index must be >= 0")
    check_sha256_hex(report_sha256, what="report_sha256")
    check_text(exam, what="exam")
    if exam_version < 1:
        raise InvalidInput("exam_version must be >= 1")
    if not EXAM_DIGEST.fullmatch(exam_digest):
        raise InvalidInput("exam_digest must be sha256:<64 lowercase hex>")


def _check(stmt: Statement, g: GradedEvidence) -> Facts:
    check_report_ref(
        ("grader", g.grader),
        g.agent,
        g.report_index,
        g.report_sha256,
        g.exam,
        g.exam_version,
        g.exam_digest,
        itself="grade itself",
    )
    statements.parse_time(g.graded_at, what="graded_at")
    if not 1 <= len(g.items) <= MAX_ITEMS:
        raise InvalidInput(f"items must hold 1..{MAX_ITEMS} graded items")
    for item in g.items:
        check_graded_item(item)
    if len({i.item_id for i in g.items}) != len(g.items):
        raise InvalidInput("items: an item_id appears twice")
    if stmt.subject != [graded_subject(g.agent, g.report_sha256)]:
        raise InvalidInput("graded evidence subject must be the agent id and report_sha256")
    return Facts(signer=g.grader, subject=g.agent)


GRADED_EVIDENCE = register(Kind(name="graded-evidence", version=1, struct=GradedEvidence, check=_check))


def make_graded_evidence(
    *,
    grader: str,
    agent: str,
    report_index: int,
    report_sha256: str,
    exam: str,
    exam_version: int,
    exam_digest: str,
    tier: Tier,
    graded_at: str,
    items: list[GradedItem],
    nonce: str | None = None,
    issued_at: str | None = None,
) -> bytes:
    """Checked statement bytes of graded evidence; sign with the grader key."""
    g = GradedEvidence(
        nonce=nonce or new_nonce(),
        issued_at=issued_at or now(),
        grader=grader,
        agent=agent,
        report_index=report_index,
        report_sha256=report_sha256,
        exam=exam,
        exam_version=exam_version,
        exam_digest=exam_digest,
        tier=tier,
        graded_at=graded_at,
        items=items,
    )
    payload = statements.make_statement(GRADED_EVIDENCE, graded_subject(agent, report_sha256), g)
    statements.parse_statement(payload)
    return payload
