"""The four statement kinds of a fresh exam sitting (docs/ledger-format.md, docs/exams.md "Sittings").

- ``sitting-request/v1`` (agent): "open a sitting of exam X for me".
- ``sitting-open/v1`` (server, grader key): names the request (index and hash), the form (generators),
  the deadline, and commits to the server's secret by its SHA-256.
- ``sitting-report/v1`` (agent): the raw responses to the sitting's items, naming the sitting.
- ``sitting-close/v1`` (server, grader key): reveals the secret, states the root the seed used and the
  digest of the regenerated items, and carries the server's grades (``outcome`` ``reported``) or all
  failures (``expired``: no report by the deadline). These grades are evidence (source ``verified``).
"""

from __future__ import annotations

import hashlib
import re
from typing import Any, Literal

import msgspec

from trustscore import canonical
from trustscore.errors import InvalidInput
from trustscore.kinds.exam_report import ReportItem
from trustscore.kinds.graded import MAX_ITEMS, GradedItem, check_graded_item
from trustscore.kinds.parties import check_key_id, check_sha256_hex, new_nonce, now
from trustscore.ledger import statements
from trustscore.ledger.statements import Facts, Kind, Predicate, Statement, Subject, check_text, register

_EXAM = re.compile(r"[a-z][a-z0-9-]{0,63}@[1-9][0-9]{0,5}", re.ASCII)
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}", re.ASCII)
#: Bytes of a POSTed sitting request envelope (the largest legal one, four signatures, is ~1.4 KB). A
#: sitting report has no such bound (its answers are not capped like an exam report's): the app's limit.
MAX_REQUEST_BYTES = 64 * 1024
Outcome = Literal["reported", "expired"]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


class FormPart(msgspec.Struct, forbid_unknown_fields=True, frozen=True, omit_defaults=True):
    prefix: str  # item ids are f"{prefix}-{n:03d}"
    generator: str  # name@version
    count: int
    #: A parametric generator's parameters (scope probes: the declaration under test); omitted when None,
    #: so forms without params encode exactly as before.
    params: dict[str, Any] | None = None


class SittingRequest(Predicate, kw_only=True, frozen=True):
    agent: str
    exam: str  # name@version, e.g. capability@1


class SittingOpen(Predicate, kw_only=True, frozen=True):
    service: str  # the server's grader key id; the signer
    agent: str
    request_index: int
    request_sha256: str
    exam: str
    form: list[FormPart]
    commitment: str  # hex SHA-256 of the 32-byte secret
    deadline: str
    opened_at: str


class SittingReport(Predicate, kw_only=True, frozen=True):
    agent: str
    sitting: int  # log index of the sitting-open statement
    commitment: str  # as in the sitting-open (binds the report to that one sitting)
    adapter: str
    sdk_version: str
    started_at: str
    elapsed_ms: int
    items: list[ReportItem]


class SittingClose(Predicate, kw_only=True, frozen=True):
    service: str
    agent: str
    sitting: int
    exam: str
    commitment: str
    secret: str  # hex of the 32 bytes; SHA-256 must equal ``commitment``
    root: str  # hex Merkle root of the log at size sitting + 1
    items_digest: str  # sha256:<hex> of the regenerated items
    outcome: Outcome
    report_index: int | None
    report_sha256: str | None
    closed_at: str
    items: list[GradedItem]
    dialogues: dict[str, list[str]]  # the dialogue moves played with the server, per item id


def _exam(text: str) -> None:
    if not _EXAM.fullmatch(text):
        raise InvalidInput("exam must be a name@version reference")


def _check_request(stmt: Statement, r: SittingRequest) -> Facts:
    check_key_id(r.agent, what="agent")
    _exam(r.exam)
    if stmt.subject != [Subject(name=r.agent, digest={"sha256": _sha(r.exam)})]:
        raise InvalidInput("sitting request subject must be the agent id and the SHA-256 of the exam ref")
    return Facts(signer=r.agent, subject=r.agent)


def _server_fields(service: str, agent: str, sitting_like: int, commitment: str) -> None:
    check_key_id(service, what="service")
    check_key_id(agent, what="agent")
    if service == agent:
        raise InvalidInput("the service key cannot sit its own exams")
    if sitting_like < 0:
        raise InvalidInput("log indexes must be >= 0")
    check_sha256_hex(commitment, what="commitment")


def _check_open(stmt: Statement, o: SittingOpen) -> Facts:
    _server_fields(o.service, o.agent, o.request_index, o.commitment)
    check_sha256_hex(o.request_sha256, what="request_sha256")
    _exam(o.exam)
    if not o.form or len(o.form) > 32 or sum(p.count for p in o.form) > MAX_ITEMS:
        raise InvalidInput("form must hold 1..32 parts")
    for p in o.form:
        check_text(p.prefix, what="form[].prefix", max_len=16)
        if not _EXAM.fullmatch(p.generator) or p.count < 1:
            raise InvalidInput("form[]: generator must be name@version and count >= 1")
    statements.parse_time(o.deadline, what="deadline")
    statements.parse_time(o.opened_at, what="opened_at")
    if stmt.subject != [Subject(name=o.agent, digest={"sha256": o.commitment})]:
        raise InvalidInput("sitting-open subject must be the agent id and the commitment")
    return Facts(signer=o.service, subject=o.agent)


def report_digest(items: list[ReportItem]) -> str:
    return hashlib.sha256(canonical.encode(items)).hexdigest()


def _check_report(stmt: Statement, r: SittingReport) -> Facts:
    check_key_id(r.agent, what="agent")
    check_sha256_hex(r.commitment, what="commitment")
    if r.sitting < 0 or r.elapsed_ms < 0:
        raise InvalidInput("sitting must be a log index and elapsed_ms >= 0")
    check_text(r.adapter, what="adapter", max_len=2048)
    check_text(r.sdk_version, what="sdk_version")
    statements.parse_time(r.started_at, what="started_at")
    if not 1 <= len(r.items) <= MAX_ITEMS or len({i.item_id for i in r.items}) != len(r.items):
        raise InvalidInput(f"items must hold 1..{MAX_ITEMS} distinct item ids")
    for i in r.items:
        if not 0 <= i.client_grade <= 1000 or any(t.elapsed_ms < 0 for t in i.turns):
            raise InvalidInput(f"item {i.item_id}: grade must be 0..1000 and times >= 0")
    if stmt.subject != [Subject(name=r.agent, digest={"sha256": report_digest(r.items)})]:
        raise InvalidInput("sitting report subject must be the agent id and the SHA-256 of its items")
    return Facts(signer=r.agent, subject=r.agent)


def _check_close(stmt: Statement, c: SittingClose) -> Facts:
    _server_fields(c.service, c.agent, c.sitting, c.commitment)
    _exam(c.exam)
    secret = bytes.fromhex(c.secret) if re.fullmatch(r"[0-9a-f]{64}", c.secret) else b""
    if len(secret) != 32 or hashlib.sha256(secret).hexdigest() != c.commitment:
        raise InvalidInput("secret must be 64 lowercase hex whose SHA-256 is the commitment")
    check_sha256_hex(c.root, what="root")
    if not _DIGEST.fullmatch(c.items_digest):
        raise InvalidInput("items_digest must be sha256:<64 hex>")
    statements.parse_time(c.closed_at, what="closed_at")
    if (c.outcome == "reported") != (c.report_index is not None and c.report_sha256 is not None):
        raise InvalidInput("a reported sitting names its report (index and hash); an expired one none")
    if c.report_sha256 is not None:
        check_sha256_hex(c.report_sha256, what="report_sha256")
    if not 1 <= len(c.items) <= MAX_ITEMS or len({i.item_id for i in c.items}) != len(c.items):
        raise InvalidInput(f"items must hold 1..{MAX_ITEMS} distinct item ids")
    for i in c.items:
        check_graded_item(i)
        if c.outcome == "expired" and (i.value_millis, i.result) != (0, "failure"):
            raise InvalidInput("every item of an expired sitting is a failure")
    ids = {i.item_id for i in c.items}
    if not set(c.dialogues) <= ids or sum(len(m) for m in c.dialogues.values()) > MAX_ITEMS:
        raise InvalidInput("dialogues must name graded items and hold a bounded number of moves")
    if stmt.subject != [Subject(name=c.agent, digest={"sha256": c.commitment})]:
        raise InvalidInput("sitting-close subject must be the agent id and the commitment")
    return Facts(signer=c.service, subject=c.agent)


SITTING_REQUEST = register(
    Kind(name="sitting-request", version=1, struct=SittingRequest, check=_check_request)
)
SITTING_OPEN = register(Kind(name="sitting-open", version=1, struct=SittingOpen, check=_check_open))
SITTING_REPORT = register(Kind(name="sitting-report", version=1, struct=SittingReport, check=_check_report))
SITTING_CLOSE = register(Kind(name="sitting-close", version=1, struct=SittingClose, check=_check_close))
SITTING_KINDS = frozenset({"sitting-request", "sitting-open", "sitting-report", "sitting-close"})


def make_request(agent: str, exam: str) -> bytes:
    """Checked statement bytes of a sitting request; sign with the agent's key."""
    _exam(exam)
    p = SittingRequest(nonce=new_nonce(), issued_at=now(), agent=agent, exam=exam)
    payload = statements.make_statement(
        SITTING_REQUEST, Subject(name=agent, digest={"sha256": _sha(exam)}), p
    )
    statements.parse_statement(payload)
    return payload


def make_open(o: SittingOpen) -> bytes:
    payload = statements.make_statement(
        SITTING_OPEN, Subject(name=o.agent, digest={"sha256": o.commitment}), o
    )
    statements.parse_statement(payload)
    return payload


def make_report(r: SittingReport) -> bytes:
    subject = Subject(name=r.agent, digest={"sha256": report_digest(r.items)})
    payload = statements.make_statement(SITTING_REPORT, subject, r)
    statements.parse_statement(payload)
    return payload


def make_close(c: SittingClose) -> bytes:
    payload = statements.make_statement(
        SITTING_CLOSE, Subject(name=c.agent, digest={"sha256": c.commitment}), c
    )
    statements.parse_statement(payload)
    return payload
