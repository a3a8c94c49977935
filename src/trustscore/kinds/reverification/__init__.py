"""Re-verification: the server's signed record of asking an agent's endpoint a sample of items again.

The server samples items of an agent's exam report with a seed anyone can recompute from the log
(:mod:`trustscore.kinds.reverification.sampling`), asks the endpoint the agent's card declares, re-grades the answers
with the same grader versions and compares them with the grades the report earned
(:mod:`trustscore.kinds.reverification.compare`). It also asks a sample of private-tier items. Signed by a service key
with the ``reverify`` role. Everything the outcome follows from is in the statement, and the check below
re-derives the seed, the per-item verdicts, the share, the outcome and the security status transition, so
a statement that contradicts itself is never admitted. docs/reverification.md.
"""

from __future__ import annotations

from typing import Literal

import msgspec

from trustscore import canonical
from trustscore.errors import InvalidInput
from trustscore.kinds.graded import (
    DIMENSIONS,
    EXAM_DIGEST,
    GRADER_REF,
    GradeResult,
    check_report_ref,
    graded_subject,
)
from trustscore.kinds.parties import new_nonce, now
from trustscore.kinds.reverification import compare, sampling, security
from trustscore.kinds.reverification.compare import Outcome
from trustscore.kinds.reverification.security import SecurityObserved, SecurityState, SecurityStatus
from trustscore.ledger import statements
from trustscore.ledger.statements import Facts, Kind, Predicate, Statement, check_text, register

MAX_ITEMS = 1000
MAX_ERROR = 500
Trigger = Literal["report", "schedule"]


class ReverifiedItem(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """A sampled item of the report: the grade it earned there and the grade the endpoint earns now."""

    item_id: str
    dimension: str
    reported_millis: int  # the server's graded evidence for the report
    observed_millis: int | None  # None: the endpoint gave no answer at all
    matched: bool  # |reported - observed| <= compare.ITEM_TOLERANCE_MILLIS
    error: str | None  # why the answers stopped early, if they did


class PrivateItem(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """A sampled private-tier item (never published) and the grade the endpoint earned on it."""

    exam: str  # name@version of the private set
    exam_digest: str  # sha256:<64 hex> of the set's file
    item_id: str
    dimension: str
    grader: str  # name@version
    value_millis: int | None  # None: no answer at all (no evidence is derived)
    result: GradeResult
    error: str | None


class Reverification(Predicate, kw_only=True, frozen=True):
    verifier: str  # key id of the server's reverify key; the signer
    agent: str  # the subject
    report_index: int
    report_sha256: str  # SHA-256 hex of the report's statement bytes
    exam: str
    exam_version: int
    exam_digest: str
    endpoint: str  # the URL asked (the agent card's endpoint at the time)
    trigger: Trigger  # "report": right after the report was logged; "schedule": an operator's re-run
    checkpoint_size: int  # the tree whose root seeds the sample (report_index + 2 for trigger "report")
    checkpoint_root: str  # base64 of that tree's RFC 6962 root
    seed: str  # 64 hex: sampling.seed(root, report_sha256, agent)
    items: list[ReverifiedItem]  # in sample order
    private_items: list[PrivateItem]  # in private-sample order
    matched_millis: int  # share of matching items x 1000
    outcome: Outcome
    security_observed: SecurityObserved  # what this run's security probes showed
    security_status: SecurityStatus  # the standing status after this run (security.step)
    security_streak: int  # runs so far observing below the standing status
    ran_at: str


def _check_error(error: str | None, where: str) -> None:
    if error is not None:
        check_text(error, what=f"{where}.error", max_len=MAX_ERROR)


def _check_item(i: ReverifiedItem) -> None:
    where = f"items[{i.item_id}]"
    check_text(i.item_id, what="items[].item_id")
    if i.dimension not in DIMENSIONS:
        raise InvalidInput(f"{where}.dimension must be one of {', '.join(DIMENSIONS)}")
    if not 0 <= i.reported_millis <= 1000:
        raise InvalidInput(f"{where}.reported_millis must be 0..1000")
    if i.observed_millis is not None and not 0 <= i.observed_millis <= 1000:
        raise InvalidInput(f"{where}.observed_millis must be 0..1000 or null")
    if i.matched != compare.item_matches(i.reported_millis, i.observed_millis):
        raise InvalidInput(f"{where}.matched contradicts the tolerance of {compare.ITEM_TOLERANCE_MILLIS}")
    if i.observed_millis is None and i.error is None:
        raise InvalidInput(f"{where}: an item without an answer must say why (error)")
    _check_error(i.error, where)


def _check_private(p: PrivateItem) -> None:
    where = f"private_items[{p.item_id}]"
    check_text(p.item_id, what="private_items[].item_id")
    check_text(p.exam, what=f"{where}.exam")
    if not GRADER_REF.fullmatch(p.exam):
        raise InvalidInput(f"{where}.exam must be name@version")
    if not EXAM_DIGEST.fullmatch(p.exam_digest):
        raise InvalidInput(f"{where}.exam_digest must be sha256:<64 lowercase hex>")
    if p.dimension not in DIMENSIONS:
        raise InvalidInput(f"{where}.dimension must be one of {', '.join(DIMENSIONS)}")
    if not GRADER_REF.fullmatch(p.grader):
        raise InvalidInput(f"{where}.grader must be a name@version reference")
    if p.value_millis is None:
        if p.error is None or p.result != "failure":
            raise InvalidInput(f"{where}: an item without an answer has result failure and an error")
    elif not 0 <= p.value_millis <= 1000:
        raise InvalidInput(f"{where}.value_millis must be 0..1000 or null")
    _check_error(p.error, where)


def security_probes(items: list[ReverifiedItem], private_items: list[PrivateItem]) -> list[int]:
    """The grades of the security probes a run asked that got an answer (public and private)."""
    public = [i.observed_millis for i in items if i.dimension == "security"]
    private = [p.value_millis for p in private_items if p.dimension == "security"]
    return [m for m in public + private if m is not None]


def _check_results(r: Reverification) -> None:
    ids = [i.item_id for i in r.items]
    if not 1 <= len(ids) <= MAX_ITEMS or len(set(ids)) != len(ids):
        raise InvalidInput(f"items must hold 1..{MAX_ITEMS} sampled items, each once")
    for item in r.items:
        _check_item(item)
    refs = [sampling.private_ref(p.exam, p.item_id) for p in r.private_items]
    if len(refs) > MAX_ITEMS or len(set(refs)) != len(refs):
        raise InvalidInput(f"private_items: at most {MAX_ITEMS}, each exam item once")
    for p in r.private_items:
        _check_private(p)
    result = compare.compare([(i.item_id, i.reported_millis, i.observed_millis) for i in r.items])
    if (r.matched_millis, r.outcome) != (result.matched_millis, result.outcome):
        raise InvalidInput(
            f"matched_millis/outcome must be {result.matched_millis}/{result.outcome} for these items"
        )
    if r.security_observed != security.observe(security_probes(r.items, r.private_items)):
        raise InvalidInput("security_observed contradicts the security probes' grades")
    security.check_consistent(r.security_observed, r.security_status, r.security_streak)


def _check(stmt: Statement, r: Reverification) -> Facts:
    check_report_ref(
        ("verifier", r.verifier),
        r.agent,
        r.report_index,
        r.report_sha256,
        r.exam,
        r.exam_version,
        r.exam_digest,
        itself="re-verify itself",
    )
    statements.check_url(r.endpoint, what="endpoint")
    if r.checkpoint_size < sampling.seed_size(r.report_index):
        raise InvalidInput("checkpoint_size must cover the report and the entry after it (report_index + 2)")
    if r.trigger == "report" and r.checkpoint_size != sampling.seed_size(r.report_index):
        raise InvalidInput("a report-triggered run is seeded by the tree of size report_index + 2")
    root = canonical.b64decode(r.checkpoint_root, what="checkpoint_root")
    if len(root) != sampling.HASH_SIZE:
        raise InvalidInput("checkpoint_root must be a 32-byte hash")
    if r.seed != sampling.seed(root, bytes.fromhex(r.report_sha256), r.agent).hex():
        raise InvalidInput("seed must be sampling.seed(checkpoint_root, report_sha256, agent)")
    statements.parse_time(r.ran_at, what="ran_at")
    _check_results(r)
    if stmt.subject != [graded_subject(r.agent, r.report_sha256)]:
        raise InvalidInput("re-verification subject must be the agent id and report_sha256")
    return Facts(signer=r.verifier, subject=r.agent)


REVERIFICATION = register(Kind(name="reverification", version=1, struct=Reverification, check=_check))


def make_reverification(
    *,
    verifier: str,
    agent: str,
    report_index: int,
    report_sha256: str,
    exam: str,
    exam_version: int,
    exam_digest: str,
    endpoint: str,
    trigger: Trigger,
    checkpoint_size: int,
    checkpoint_root: bytes,
    items: list[ReverifiedItem],
    private_items: list[PrivateItem],
    security_before: SecurityState,
    ran_at: str,
    nonce: str | None = None,
    issued_at: str | None = None,
) -> bytes:
    """Checked statement bytes; the seed, share, outcome and security status are computed here.

    ``security_before`` is the agent's standing security state before this run (``status.security_state``
    of its earlier statements).

    Pass ``nonce=run_nonce(...)`` so that a run retried after a crash cannot be logged twice (the log
    refuses a signer's nonce twice).
    """
    seed = sampling.seed(checkpoint_root, bytes.fromhex(report_sha256), agent)
    result = compare.compare([(i.item_id, i.reported_millis, i.observed_millis) for i in items])
    observed = security.observe(security_probes(items, private_items))
    after = security.step(security_before, observed)
    r = Reverification(
        nonce=nonce or new_nonce(),
        issued_at=issued_at or now(),
        verifier=verifier,
        agent=agent,
        report_index=report_index,
        report_sha256=report_sha256,
        exam=exam,
        exam_version=exam_version,
        exam_digest=exam_digest,
        endpoint=endpoint,
        trigger=trigger,
        checkpoint_size=checkpoint_size,
        checkpoint_root=canonical.b64encode(checkpoint_root),
        seed=seed.hex(),
        items=items,
        private_items=private_items,
        matched_millis=result.matched_millis,
        outcome=result.outcome,
        security_observed=observed,
        security_status=after.status,
        security_streak=after.streak,
        ran_at=ran_at,
    )
    payload = statements.make_statement(REVERIFICATION, graded_subject(agent, report_sha256), r)
    statements.parse_statement(payload)
    return payload


def run_nonce(agent: str, report_index: int, seed: bytes) -> str:
    """The deterministic nonce of run (agent, report_index, seed): the log's idempotency key for it."""
    return canonical.sha256(f"reverify:{agent}:{report_index}:".encode() + seed).hex()[:32]
