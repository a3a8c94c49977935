"""The rung rule (issue #13): rung 3 needs a captured exit code of 0; a failed run never reaches it."""

from __future__ import annotations

import msgspec
import pytest

from tests.unit.evidence.signed import T0, new_id, refused
from trustscore.errors import InvalidInput
from trustscore.kinds.work_records import Artifact, Commit, Confirmation, Run, WorkRecord, make_work_record
from trustscore.ladder.rule import (
    ARTIFACT_CHANGED,
    CI_VERIFIED,
    COMMIT_OBSERVED,
    DONE_CLAIMED,
    RULE_0,
    RULE_1,
    SELF_ATTESTED_WEIGHT,
    TEST_OR_BUILD_PASSED,
    UNFLOWN,
    VERIFIED_RUNG,
    check_rule,
    rung_of,
    weight,
)
from trustscore.ledger import statements

A, B = "aa" * 32, "bb" * 32


def record(**kw: object) -> WorkRecord:
    agent = new_id()
    fields: dict[str, object] = {
        "reporter": agent,
        "agent": agent,
        "task_ref": "T-1",
        "claimed_outcome": "done",
    }
    fields.update(kw)
    payload = make_work_record(finished_at=T0, **fields)  # type: ignore[arg-type]
    p = statements.parse_statement(payload).predicate
    assert isinstance(p, WorkRecord)
    return p


def test_a_test_command_without_a_captured_exit_code_is_done_claimed_result_unknown() -> None:
    w = record(runs=[Run(kind="test", command="cargo test")])
    r = rung_of(w, RULE_1)
    assert (r.rung, r.name, r.summary) == (DONE_CLAIMED, "done_claimed", "result unknown")
    assert not r.outcome_detected
    # the withdrawn rule granted rung 3 from the command string alone
    assert rung_of(w, RULE_0).rung == TEST_OR_BUILD_PASSED


def test_rung_3_needs_exit_code_zero() -> None:
    assert (
        rung_of(record(runs=[Run(kind="test", command="pytest", exit_code=0)])).rung == TEST_OR_BUILD_PASSED
    )


@pytest.mark.parametrize(
    "extra",
    [
        {},
        {"commits": [Commit(repository="github.com/x/y", commit="abcdef1")]},
        {"artifacts": [Artifact(path="src/a.py", sha256_before=A, sha256_after=B)]},
    ],
)
def test_a_failed_run_never_reaches_rung_3(extra: dict[str, object]) -> None:
    runs = [Run(kind="test", command="pytest", exit_code=0), Run(kind="test", command="pytest", exit_code=1)]
    r = rung_of(record(runs=runs, **extra))
    assert r.rung < TEST_OR_BUILD_PASSED
    assert r.summary == "the last test or build run exited 1"
    every = rung_of(record(runs=[Run(kind="build", command="make", exit_code=2)], **extra))
    assert every.rung < TEST_OR_BUILD_PASSED and every.summary == "every test or build run failed"


def test_the_ladder_in_order() -> None:
    changed = [Artifact(path="a", sha256_before=A, sha256_after=B)]
    unchanged = [Artifact(path="a", sha256_before=A, sha256_after=A)]
    assert rung_of(record(claimed_outcome="unknown")).rung == UNFLOWN
    assert rung_of(record(claimed_outcome="failed", artifacts=changed)).rung == UNFLOWN
    assert rung_of(record()).rung == DONE_CLAIMED
    assert rung_of(record(artifacts=unchanged)).rung == DONE_CLAIMED
    assert rung_of(record(artifacts=changed)).rung == ARTIFACT_CHANGED
    assert rung_of(record(commits=[Commit(repository="r", commit="abcdef1")])).rung == COMMIT_OBSERVED
    ci = Confirmation(kind="ci", ref="run/1", status="success")
    assert rung_of(record(confirmations=[ci])).rung == CI_VERIFIED
    pending = Confirmation(kind="deployment", ref="d/1", status="pending")
    assert rung_of(record(confirmations=[pending])).rung == DONE_CLAIMED


def test_a_self_attested_rung_always_weighs_less_than_the_same_rung_confirmed() -> None:
    for rung in range(1, 6):
        best_self = weight(rung, "self", 1.0)
        worst_confirmed = weight(rung, "confirmed", 0.5)  # an unrated reporter's counterparty weight
        assert best_self < worst_confirmed
    assert weight(UNFLOWN, "confirmed", 1.0) == 0.0
    assert SELF_ATTESTED_WEIGHT < 0.5


def test_an_unknown_rule_is_refused_by_name() -> None:
    with pytest.raises(InvalidInput, match="ladder-rule@0, ladder-rule@1"):
        check_rule("ladder-rule@9")


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        ("runs", [{"kind": "test", "command": "x", "exit_code": 2**40}], "exit_code"),
        ("runs", [{"kind": "test", "command": "x" * 2001}], "run command"),
        ("runs", [{"kind": "test", "command": "x"}] * 1001, "at most 1000"),
        ("commits", [{"repository": "r", "commit": "XYZ"}], "lowercase hex"),
        ("artifacts", [{"path": "a"}], "sha256_before or sha256_after"),
        ("task_ref", "x" * 501, "task_ref"),
        ("attestation", "confirmed", "cannot confirm its own work"),
        ("surprise", 1, "unknown field"),
    ],
)
def test_bounded_and_checked(field: str, value: object, words: str) -> None:
    agent = new_id()
    payload = make_work_record(
        reporter=agent, agent=agent, task_ref="T", claimed_outcome="done", finished_at=T0
    )
    refused(payload, lambda s: s["predicate"].update({field: value}), InvalidInput, words)


def test_the_record_round_trips_its_evidence() -> None:
    w = record(
        runs=[Run(kind="test", command="pytest -q", exit_code=0, output_sha256=A)], model="m", adapter="h"
    )
    assert msgspec.json.decode(msgspec.json.encode(w), type=WorkRecord) == w


def _confirmed(*statuses: tuple[str, str], **kw: object) -> WorkRecord:
    return record(
        confirmations=[Confirmation(kind=k, ref=f"{k}/{i}", status=s) for i, (k, s) in enumerate(statuses)],  # type: ignore[arg-type]
        **kw,
    )


@pytest.mark.parametrize(
    "statuses",
    [
        (("ci", "success"), ("deployment", "failure")),  # green CI, then the deployment failed
        (("ci", "success"), ("ci", "failure")),  # CI went red after it was green
        (("pr", "success"), ("deployment", "failure"), ("deployment", "pending")),  # pending decides nothing
    ],
)
def test_a_red_confirmation_is_not_verified_whatever_went_green_before(
    statuses: tuple[tuple[str, str], ...],
) -> None:
    """A record whose CI, PR or deployment's newest decided status is a failure was rung 5 under
    ladder-rule@1 (any green confirmation sufficed): the outcome stats counted failed deployments as
    verified work, as rung 3 had counted a red test run before it needed an exit code of 0. Its rows
    keep their rule; the current rule is not fooled."""
    changed = [Artifact(path="a", sha256_before=A, sha256_after=B)]
    for extra, rung in (({}, DONE_CLAIMED), ({"artifacts": changed}, ARTIFACT_CHANGED)):
        w = _confirmed(*statuses, **extra)
        assert rung_of(w, RULE_1).rung == CI_VERIFIED
        r = rung_of(w)
        assert r.rung == rung < VERIFIED_RUNG, (statuses, extra, r)
        assert r.outcome_detected and "failure" in r.summary
    # a commit on top of a red confirmation reaches no higher than on top of a red run
    commit = [Commit(repository="github.com/x/y", commit="abcdef1")]
    assert rung_of(_confirmed(*statuses, commits=commit)).rung == ARTIFACT_CHANGED


def test_a_confirmation_green_again_after_red_is_verified() -> None:
    w = _confirmed(("ci", "failure"), ("ci", "success"))
    assert rung_of(w).rung == CI_VERIFIED
    # a kind still red keeps the record below verified even if another kind is green
    assert rung_of(_confirmed(("deployment", "failure"), ("ci", "success"))).rung < VERIFIED_RUNG
