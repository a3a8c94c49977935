"""The work record: an agent, or a party acting for or confirming it, reports a unit of finished work.

A record names the task (``task_ref``), what the agent claims (``claimed_outcome``) and the evidence the
work left: changed artifacts (path and digests before/after), test or build runs (command, exit code when
captured, digest of the output), commits (repository, commit id) and CI / PR / deployment confirmations.
It never says "succeeded": the server assigns the record a rung by a versioned rule
(:mod:`trustscore.ladder.rule`, docs/evidence-ladder.md).

``attestation`` says who vouches: ``self`` when the reporter is the agent or acts for it (the same key or
the same controller: a harness, the agent's own CI), ``confirmed`` when the reporter is someone else — a
counterparty, a marketplace or a key registered as CI (party card role ``ci``) of another interest. The
admission rule (``kinds/admission.py``) checks the claim against the cards; the kind checks the shape.
Every list and string is bounded.
"""

from __future__ import annotations

import hashlib
import re
from typing import Literal

import msgspec

from trustscore.errors import InvalidInput
from trustscore.kinds.parties import check_key_id, check_sha256_hex, new_nonce, now
from trustscore.ledger import statements
from trustscore.ledger.statements import Facts, Kind, Predicate, Statement, Subject, check_text, register

Claim = Literal["done", "partial", "failed", "unknown"]
Attestation = Literal["self", "confirmed"]
RunKind = Literal["test", "build"]
ConfirmationKind = Literal["ci", "pr", "deployment"]
ConfirmationStatus = Literal["success", "failure", "pending"]

MAX_ARTIFACTS = 1000
MAX_RUNS = 1000
MAX_COMMITS = 100
MAX_CONFIRMATIONS = 100
MAX_PATH = 1000
MAX_COMMAND = 2000
MAX_REF = 500
#: Exit codes a process can report (POSIX 0..255, Windows 32-bit; negatives are signals).
EXIT_MIN, EXIT_MAX = -(2**31), 2**32 - 1
_COMMIT = re.compile(r"[0-9a-f]{7,64}", re.ASCII)


class _Part(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    pass


class Artifact(_Part, kw_only=True, frozen=True):
    """A file the work touched: absent ``sha256_before`` = created, absent ``sha256_after`` = deleted."""

    path: str
    sha256_before: str | None = None
    sha256_after: str | None = None

    @property
    def changed(self) -> bool:
        return self.sha256_before != self.sha256_after


class Run(_Part, kw_only=True, frozen=True):
    """A test or build command; ``exit_code`` null when its result was never captured."""

    kind: RunKind
    command: str
    exit_code: int | None = None
    output_sha256: str | None = None


class Commit(_Part, kw_only=True, frozen=True):
    repository: str
    commit: str  # 7..64 lowercase hex (a git object id, possibly abbreviated)


class Confirmation(_Part, kw_only=True, frozen=True):
    kind: ConfirmationKind
    ref: str  # a CI run, PR or deployment id or URL
    status: ConfirmationStatus


class WorkRecord(Predicate, kw_only=True, frozen=True):
    reporter: str  # key id; the signer
    agent: str  # key id of the agent that did the work; the subject
    attestation: Attestation
    task_ref: str
    claimed_outcome: Claim
    model: str | None = None  # the model that did the work, as the harness reports it
    adapter: str | None = None  # the harness (e.g. "claude_code") whose transcript this came from
    finished_at: str
    artifacts: list[Artifact] = msgspec.field(default_factory=list)
    runs: list[Run] = msgspec.field(default_factory=list)
    commits: list[Commit] = msgspec.field(default_factory=list)
    confirmations: list[Confirmation] = msgspec.field(default_factory=list)


def work_subject(agent: str, task_ref: str) -> Subject:
    return Subject(name=agent, digest={"sha256": hashlib.sha256(task_ref.encode("utf-8")).hexdigest()})


def _bounded(items: list[_Part], limit: int, what: str) -> None:
    if len(items) > limit:
        raise InvalidInput(f"{what}: at most {limit} entries")


def _check(stmt: Statement, w: WorkRecord) -> Facts:
    check_key_id(w.reporter, what="reporter")
    check_key_id(w.agent, what="agent")
    if w.attestation == "confirmed" and w.reporter == w.agent:
        raise InvalidInput("an agent cannot confirm its own work (attestation must be self)")
    check_text(w.task_ref, what="task_ref", max_len=MAX_REF)
    for value, what in ((w.model, "model"), (w.adapter, "adapter")):
        if value is not None:
            check_text(value, what=what)
    statements.parse_time(w.finished_at, what="finished_at")
    _bounded(list(w.artifacts), MAX_ARTIFACTS, "artifacts")
    _bounded(list(w.runs), MAX_RUNS, "runs")
    _bounded(list(w.commits), MAX_COMMITS, "commits")
    _bounded(list(w.confirmations), MAX_CONFIRMATIONS, "confirmations")
    for a in w.artifacts:
        check_text(a.path, what="artifact path", max_len=MAX_PATH)
        if a.sha256_before is None and a.sha256_after is None:
            raise InvalidInput("an artifact needs sha256_before or sha256_after")
        for digest in (a.sha256_before, a.sha256_after):
            if digest is not None:
                check_sha256_hex(digest, what="artifact digest")
    for r in w.runs:
        check_text(r.command, what="run command", max_len=MAX_COMMAND)
        if r.exit_code is not None and not EXIT_MIN <= r.exit_code <= EXIT_MAX:
            raise InvalidInput(f"exit_code must be {EXIT_MIN}..{EXIT_MAX}")
        if r.output_sha256 is not None:
            check_sha256_hex(r.output_sha256, what="output_sha256")
    for c in w.commits:
        check_text(c.repository, what="repository", max_len=MAX_REF)
        if not _COMMIT.fullmatch(c.commit):
            raise InvalidInput("commit must be 7..64 lowercase hex digits")
    for f in w.confirmations:
        check_text(f.ref, what="confirmation ref", max_len=MAX_REF)
    if stmt.subject != [work_subject(w.agent, w.task_ref)]:
        raise InvalidInput("work record subject must be the agent id and the SHA-256 of task_ref")
    return Facts(signer=w.reporter, subject=w.agent)


WORK_RECORD = register(Kind(name="work-record", version=1, struct=WorkRecord, check=_check))


def make_work_record(
    *,
    reporter: str,
    agent: str,
    task_ref: str,
    claimed_outcome: Claim,
    finished_at: str,
    attestation: Attestation | None = None,
    model: str | None = None,
    adapter: str | None = None,
    artifacts: list[Artifact] | None = None,
    runs: list[Run] | None = None,
    commits: list[Commit] | None = None,
    confirmations: list[Confirmation] | None = None,
    nonce: str | None = None,
    issued_at: str | None = None,
) -> bytes:
    """Checked statement bytes of a work record; sign with the reporter's key. ``attestation`` defaults
    to ``self`` when the reporter is the agent, else ``confirmed``."""
    w = WorkRecord(
        nonce=nonce or new_nonce(),
        issued_at=issued_at or now(),
        reporter=reporter,
        agent=agent,
        attestation=attestation or ("self" if reporter == agent else "confirmed"),
        task_ref=task_ref,
        claimed_outcome=claimed_outcome,
        model=model,
        adapter=adapter,
        finished_at=finished_at,
        artifacts=artifacts or [],
        runs=runs or [],
        commits=commits or [],
        confirmations=confirmations or [],
    )
    payload = statements.make_statement(WORK_RECORD, work_subject(agent, task_ref), w)
    statements.parse_statement(payload)
    return payload
