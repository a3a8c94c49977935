"""The reverification/v1 kind: signed by the re-verifier about the agent; a self-contradicting statement
is never admitted."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.unit.evidence.signed import Log, refused
from tests.unit.reverify.kit import (
    AGENT,
    REPORT_SHA,
    ROOT,
    VERIFIER,
    item,
    matching,
    payload,
    private,
    statement,
)
from trustscore import canonical
from trustscore.errors import InvalidInput, SignatureError
from trustscore.kinds.reverification import REVERIFICATION, run_nonce, sampling
from trustscore.ledger import statements


def test_signed_by_the_verifier_about_the_agent() -> None:
    log = Log()
    verifier = log.service("reverify", ["reverify"])
    agent = log.party("agent")
    entry = log.entries[log.submit(payload(verifier=verifier.id, agent=agent.id), verifier)]
    assert (
        entry.kind == REVERIFICATION.predicate_type == "https://trustscore.dev/predicates/reverification/v1"
    )
    assert (entry.signer, entry.subject) == (verifier.id, agent.id)
    assert entry.statement.statement.subject[0].digest == {"sha256": REPORT_SHA.hex()}
    with pytest.raises(SignatureError, match=f"must be signed by {verifier.id}"):
        log.submit(payload(verifier=verifier.id, agent=agent.id), agent)


def test_the_builder_computes_seed_share_outcome_and_security() -> None:
    r = statement(
        items=[*matching(9), item("x", 1000, 0, "security")],
        private_items=[private("p", 1000)],
    )
    assert r.seed == sampling.seed(ROOT, REPORT_SHA, AGENT.id).hex()
    assert canonical.b64decode(r.checkpoint_root) == ROOT
    assert (r.matched_millis, r.outcome) == (900, "match")
    assert (r.security_observed, r.security_status, r.security_streak) == ("fail", "unverified", 1)
    assert all(isinstance(v, int) for v in (r.matched_millis, r.report_index, r.checkpoint_size))


def test_run_nonce_is_the_run_id() -> None:
    seed = bytes(32)
    assert run_nonce(AGENT.id, 5, seed) == run_nonce(AGENT.id, 5, seed)
    assert run_nonce(AGENT.id, 5, seed) != run_nonce(AGENT.id, 6, seed) != run_nonce(AGENT.id, 5, b"\1" * 32)
    r = statements.parse_statement(payload(nonce=run_nonce(AGENT.id, 5, seed))).predicate
    assert r.nonce == run_nonce(AGENT.id, 5, seed)


def _items(mutate: Any) -> Any:
    def apply(stmt: dict[str, Any]) -> None:
        mutate(stmt["predicate"]["items"])

    return apply


def _set(**fields: object) -> Any:
    return lambda s: s["predicate"].update(fields)


BASE = payload()


@pytest.mark.parametrize(
    ("mutate", "words"),
    [
        (_set(verifier="server"), "verifier"),
        (_set(agent=VERIFIER.id), "differ"),
        (_set(report_index=-1), "report_index"),
        (_set(report_sha256="AB" * 32), "report_sha256"),
        (_set(exam_version=0), "exam_version"),
        (_set(exam_digest="ab" * 32), "exam_digest"),
        (_set(endpoint="ftp://agent.example/"), "endpoint"),
        (_set(trigger="whim"), "trigger"),
        (_set(checkpoint_size=6), "report_index \\+ 2"),
        (_set(checkpoint_size=9), "report-triggered"),
        (_set(checkpoint_root=canonical.b64encode(ROOT[:31])), "32-byte"),
        (_set(seed="00" * 32), "seed must be"),
        (_set(matched_millis=1000 - 1), "matched_millis"),
        (_set(outcome="mismatch"), "outcome"),
        (_set(security_observed="pass"), "security_observed"),
        (_set(security_status="failed", security_streak=1), "below failed"),
        (_set(security_streak=3), "security_streak"),
        (_set(ran_at="now"), "ran_at"),
        (_set(matched_millis=1.0), "matched_millis"),
        (_set(extra=1), "extra"),
        (_items(lambda items: items.append(dict(items[0]))), "each once"),
        (_items(lambda items: items.clear()), "1..1000"),
        (_items(lambda items: items[0].update(observed_millis=800)), "matched contradicts"),
        (_items(lambda items: items[0].update(matched=False)), "matched contradicts"),
        (_items(lambda items: items[0].update(reported_millis=1001)), "reported_millis"),
        (_items(lambda items: items[0].update(dimension="charm")), "dimension"),
        (_items(lambda items: items[0].update(observed_millis=None, matched=False)), "must say why"),
        (_items(lambda items: items[0].update(error="line\nbreak")), "error"),
    ],
)
def test_refused(mutate: Any, words: str) -> None:
    refused(BASE, mutate, InvalidInput, words)


def test_private_items_are_checked() -> None:
    base = payload(private_items=[private("p-1", 1000, "capability")])

    def priv(**fields: object) -> Any:
        return lambda s: s["predicate"]["private_items"][0].update(fields)

    refused(base, priv(exam="probe"), InvalidInput, "name@version")
    refused(base, priv(value_millis=None), InvalidInput, "without an answer")
    refused(base, priv(value_millis=1001), InvalidInput, "value_millis")
    refused(base, priv(grader="injection"), InvalidInput, "grader")
    refused(
        base,
        lambda s: s["predicate"]["private_items"].append(dict(s["predicate"]["private_items"][0])),
        InvalidInput,
        "each exam item once",
    )


def test_subject_must_pin_the_report() -> None:
    def subject(stmt: dict[str, Any]) -> None:
        stmt["subject"][0]["digest"]["sha256"] = "cd" * 32

    refused(BASE, subject, InvalidInput, "subject")


def test_payload_is_canonical_json_without_floats() -> None:
    raw = json.loads(BASE)
    assert canonical.encode(raw) == BASE
