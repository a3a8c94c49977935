"""``scope-run/v1``: a scope-honesty run the server itself made against an agent's declared endpoint.

The server (its re-verification key, role ``reverify``) sits a fresh ``scope@1`` instance for the agent:
weekly, and after every card whose declarations or declared model version changed
(docs/scope-honesty.md, "Server runs"). One statement holds everything the scores need from the log
alone: the card evaluated (index, declarations digest, model version), the form built from it, the seed,
the digests of the generated items and of every answer, and the graded outcome.

The seed must be unknown to the agent while it answers, checkable afterwards, and not the server's
choice: ``seed_signature`` is the verifier key's Ed25519 signature (deterministic, RFC 8032) over
``SEED_DOMAIN || agent || 0x00 || run_key || 0x00 || declarations_digest``, and the sitting seed is
``SHA-256(SEED_DOMAIN || signature)``; items are ``exams.forms.instantiate(form, seed)``. Anyone holding
the verifier's key (from its service card) regenerates the items and compares ``items_digest``
(``exams.scope_items.check_items``). The nonce is derived from (agent, run_key), so a run retried after a crash cannot
be logged twice. Admission (``kinds/admission.py``): signer a service key with the ``reverify`` role,
subject a registered agent, as for a re-verification.
"""

from __future__ import annotations

import hashlib
import re
from typing import Literal

import msgspec

from trustscore import canonical
from trustscore.errors import InvalidInput
from trustscore.kinds.graded import MAX_ITEMS, GradedItem, check_graded_item
from trustscore.kinds.parties import check_key_id, check_sha256_hex, now
from trustscore.kinds.sittings import FormPart
from trustscore.ledger import statements
from trustscore.ledger.statements import (
    Facts,
    Kind,
    Predicate,
    Statement,
    Subject,
    check_text,
)

SCOPE_EXAM = "scope@1"  # the exam a server run sits (exams/public/scope@1)
SEED_DOMAIN = b"trustscore/scope-run/seed/v1\x00"
MAX_ERROR = 300
Trigger = Literal["schedule", "declarations"]
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}", re.ASCII)
_RUN_KEY = re.compile(r"(week|card):[0-9]{1,18}", re.ASCII)


class ScopeAnswer(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    item_id: str
    sha256: str | None  # hex SHA-256 of the canonical list of the agent's outputs; None: no answer
    error: str | None  # why there was no (complete) answer: refused, timed out, unreachable


class ScopeRun(Predicate, kw_only=True, frozen=True):
    verifier: str  # the server's reverify key; the signer
    agent: str  # the subject
    trigger: Trigger
    run_key: str  # "week:<n>" (n-th scope interval since the epoch) or "card:<index>"
    card_index: int  # the card evaluated (the agent's newest when the run started)
    declarations_digest: str  # of that card (ledger.cards.declarations_digest)
    model_version: str | None
    endpoint: str
    exam: str  # scope@1
    form: list[FormPart]
    seed_signature: str  # base64 of the verifier's signature over seed_message(...)
    items_digest: str
    answers: list[ScopeAnswer]
    items: list[GradedItem]
    ran_at: str


def seed_message(agent: str, run_key: str, declarations_digest: str) -> bytes:
    return SEED_DOMAIN + f"{agent}\x00{run_key}\x00{declarations_digest}".encode()


def sitting_seed(signature: bytes) -> bytes:
    return hashlib.sha256(SEED_DOMAIN + signature).digest()


def run_nonce(agent: str, run_key: str) -> str:
    """The deterministic nonce of the run (agent, run_key): the log's idempotency key for it."""
    return canonical.sha256(f"scope-run:{agent}:{run_key}".encode()).hex()[:32]


def answer_digest(outputs: list[str]) -> str:
    return hashlib.sha256(canonical.encode(outputs)).hexdigest()


def _check(stmt: Statement, r: ScopeRun) -> Facts:
    check_key_id(r.verifier, what="verifier")
    check_key_id(r.agent, what="agent")
    if r.verifier == r.agent:
        raise InvalidInput("the verifier cannot run its own scope suite")
    if not _RUN_KEY.fullmatch(r.run_key):
        raise InvalidInput("run_key must be week:<n> or card:<index>")
    if (
        r.card_index < 0
        or not _DIGEST.fullmatch(r.declarations_digest)
        or not _DIGEST.fullmatch(r.items_digest)
    ):
        raise InvalidInput("card_index must be >= 0 and the digests sha256:<64 hex>")
    if r.model_version is not None:
        check_text(r.model_version, what="model_version")
    check_text(r.endpoint, what="endpoint", max_len=2048)
    if r.exam != SCOPE_EXAM:
        raise InvalidInput(f"exam must be {SCOPE_EXAM}")
    if not r.form or len(r.form) > 32:
        raise InvalidInput("form must hold 1..32 parts")
    if len(canonical.b64decode(r.seed_signature, what="seed_signature")) != 64:
        raise InvalidInput("seed_signature must be a 64-byte Ed25519 signature")
    statements.parse_time(r.ran_at, what="ran_at")
    ids = [i.item_id for i in r.items]
    if not 1 <= len(ids) <= MAX_ITEMS or len(set(ids)) != len(ids):
        raise InvalidInput(f"items must hold 1..{MAX_ITEMS} distinct item ids")
    if [a.item_id for a in r.answers] != ids:
        raise InvalidInput("answers must name the graded items, in order")
    for i in r.items:
        check_graded_item(i)
    for a in r.answers:
        if a.sha256 is not None:
            check_sha256_hex(a.sha256, what="answers[].sha256")
        if a.error is not None:
            check_text(a.error, what="answers[].error", max_len=MAX_ERROR)
        if a.sha256 is None and a.error is None:
            raise InvalidInput(f"answers[{a.item_id}]: an item without an answer must say why (error)")
    if stmt.subject != [subject(r.agent, r.run_key)]:
        raise InvalidInput("scope-run subject must be the agent id and the SHA-256 of its run key")
    return Facts(signer=r.verifier, subject=r.agent)


def subject(agent: str, run_key: str) -> Subject:
    return Subject(name=agent, digest={"sha256": hashlib.sha256(run_key.encode()).hexdigest()})


SCOPE_RUN = statements.register(Kind(name="scope-run", version=1, struct=ScopeRun, check=_check))


def make_scope_run(run: ScopeRun) -> bytes:
    """Checked statement bytes of ``run`` (build it with ``nonce=run_nonce(...)``)."""
    payload = statements.make_statement(SCOPE_RUN, subject(run.agent, run.run_key), run)
    statements.parse_statement(payload)
    return payload


__all__ = [
    "SCOPE_RUN",
    "ScopeAnswer",
    "ScopeRun",
    "make_scope_run",
    "now",
    "run_nonce",
]
