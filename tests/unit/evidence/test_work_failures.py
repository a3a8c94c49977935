"""A reported failure counts against the agent (work-record derivation ``work-evidence@2``).

Under ``work-evidence@1`` a work record carried evidence only at rung 1 or more, and a record claiming
``failed`` is rung 0: an approved marketplace, or a rated CI party, reporting that an agent's work failed
left no evidence at all, while its one record of work done rated the agent's delivery near the top. And a
record of work claimed ``done`` whose own CI confirmation or last test run was red counted as a
``success`` (found by an adversarial review, 2026-12-07). Reported failures could only be absent.

The log is built signed and projected with ``verify=True``, then scored with the served models.
"""

from __future__ import annotations

import datetime as dt

import msgspec
import pytest

from trustscore.cli.agent import card_envelope
from trustscore.evidence.derive import evidence_batch
from trustscore.evidence.project_log import ProjectionState, project
from trustscore.kinds.approvals import make_approval
from trustscore.kinds.parties import make_party_card
from trustscore.kinds.work_records import Confirmation, Run, WorkRecord, make_work_record
from trustscore.ladder import work_evidence
from trustscore.ladder.rule import RUNG_WEIGHT
from trustscore.ledger import dsse, keys, statements
from trustscore.scoring import Rating, score_agents
from trustscore.scoring.inputs import DerivedEvidence
from trustscore.services.ratings import load_models

MODELS = load_models()
START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
RED_CI = Confirmation(kind="ci", ref="https://ci.example/run/1", status="failure")
GREEN_CI = Confirmation(kind="ci", ref="https://ci.example/run/2", status="success")
RED_TEST = Run(kind="test", command="pytest", exit_code=1)
GREEN_TEST = Run(kind="test", command="pytest", exit_code=0)


def _at(days: float) -> str:
    return statements.format_time(START + dt.timedelta(days=days))


class World:
    """An approved marketplace that reports agent A's work as work records."""

    def __init__(self) -> None:
        self.log_key = keys.SigningKey.generate()
        self.agent = keys.SigningKey.generate()
        self.market = keys.SigningKey.generate()
        self.envelopes: list[dsse.Envelope] = [card_envelope(self.agent, "agent-a")]
        self._add(make_party_card(self.market.public_key, "market", "marketplace"), self.market)
        self._add(
            make_approval(operator=self.log_key.id, marketplace=self.market.id, action="approve"),
            self.log_key,
        )
        self.evidence: list[DerivedEvidence] = []

    def _add(self, payload: bytes, *signers: keys.SigningKey) -> None:
        self.envelopes.append(dsse.sign(payload, list(signers)))

    def work(self, day: int, claim: str = "done", **kw: object) -> None:
        fields: dict[str, object] = {
            "task_ref": f"T-{day}",
            "claimed_outcome": claim,
            "finished_at": _at(day),
        }
        fields.update(kw)
        self._add(make_work_record(reporter=self.market.id, agent=self.agent.id, **fields), self.market)  # type: ignore[arg-type]

    def rate(self, days: float) -> dict[str, Rating]:
        state = ProjectionState(self.log_key.public_key)
        out = project([(i, msgspec.json.encode(e)) for i, e in enumerate(self.envelopes)], state, verify=True)
        assert not out.rejected, out.rejected
        self.evidence = out.evidence
        at = START + dt.timedelta(days=days)
        batch = evidence_batch(self.evidence)
        return {
            model: next(r for r in score_agents(batch, None, weights, at) if r.agent == self.agent.id)
            for model, weights in MODELS.items()
        }


FAILURES = {
    "claimed failed": {"claim": "failed"},
    "claimed failed, red tests": {"claim": "failed", "runs": [GREEN_TEST, RED_TEST]},
    "done, red CI": {"confirmations": [GREEN_CI, RED_CI]},
    "done, last test red": {"runs": [GREEN_TEST, RED_TEST]},
}


@pytest.mark.parametrize("how", list(FAILURES))
def test_a_marketplaces_reported_failures_count_against_the_agent(how: str) -> None:
    """Ten deliveries CI confirmed, then ten the marketplace reports as failed: under work-evidence@1 the
    agent kept delivery 100 in every model, as if the last ten had never been reported."""
    honest, failing = World(), World()
    for world in (honest, failing):
        for day in range(10):
            world.work(day, confirmations=[GREEN_CI])
    for day in range(10, 20):
        failing.work(day, **FAILURES[how])  # type: ignore[arg-type]
    ten_successes, then_ten_failures = honest.rate(20), failing.rate(20)
    for model in MODELS:
        before = ten_successes[model].dimensions["delivery"]
        after = then_ten_failures[model].dimensions["delivery"]
        assert before == 100.0 and after is not None and after < 85.0, (how, model, after)
        assert then_ten_failures[model].total < ten_successes[model].total  # type: ignore[operator]
    failures = [d for d in failing.evidence if d.result == "failure"]
    assert len(failures) == 10 and {d.value for d in failures} == {0.0}


def _record(**kw: object) -> WorkRecord:
    fields: dict[str, object] = {"task_ref": "T", "claimed_outcome": "done", "finished_at": _at(0)}
    fields.update(kw)
    payload = make_work_record(reporter="ts1_" + "1" * 40, agent="ts1_" + "2" * 40, **fields)  # type: ignore[arg-type]
    predicate = statements.parse_statement(payload).predicate
    assert isinstance(predicate, WorkRecord)
    return predicate


@pytest.mark.parametrize(
    ("fields", "rung"),
    [
        ({"confirmations": [GREEN_CI, RED_CI]}, 5),  # the newest decided confirmation speaks
        ({"claimed_outcome": "partial", "confirmations": [RED_CI]}, 5),
        ({"confirmations": [RED_CI, Confirmation(kind="pr", ref="p", status="pending")]}, 5),
        ({"confirmations": [Confirmation(kind="deployment", ref="d", status="failure"), GREEN_CI]}, 5),
        ({"claimed_outcome": "unknown", "confirmations": [RED_CI]}, 5),
        ({"runs": [RED_TEST]}, 3),
        ({"claimed_outcome": "partial", "runs": [RED_TEST]}, 3),  # the evidence decides, not the claim
        ({"claimed_outcome": "unknown", "runs": [GREEN_TEST, RED_TEST]}, 3),
        ({"claimed_outcome": "failed", "runs": [RED_TEST]}, 3),
        ({"claimed_outcome": "failed", "confirmations": [GREEN_CI]}, 1),  # the reporter's own word
        ({"claimed_outcome": "failed"}, 1),
    ],
)
def test_a_failure_weighs_the_evidence_that_showed_it(fields: dict[str, object], rung: int) -> None:
    [item] = work_evidence.derive_work_record(7, _record(**fields), lambda _r, _i: 0.75)
    assert (item.value, item.result, item.source) == (0.0, "failure", "real")
    assert item.extra_weight == RUNG_WEIGHT[rung] * 0.75
    assert item.key == f"work:{'ts1_' + '1' * 40}:T" and item.index == 7


@pytest.mark.parametrize(
    "fields",
    [
        {},
        {"confirmations": [RED_CI, GREEN_CI]},  # fixed: CI green again
        {"runs": [RED_TEST, GREEN_TEST]},
        {"runs": [RED_TEST], "confirmations": [GREEN_CI]},  # CI speaks over a local run
        {"claimed_outcome": "partial", "runs": [GREEN_TEST]},
        {"claimed_outcome": "unknown", "runs": [RED_TEST, GREEN_TEST, Run(kind="build", command="make")]},
        {"runs": [Run(kind="test", command="pytest")]},  # never captured
        {"confirmations": [Confirmation(kind="ci", ref="c", status="pending")]},
    ],
)
def test_a_record_that_shows_no_failure_derives_as_before(fields: dict[str, object]) -> None:
    w = _record(**fields)
    assert work_evidence.failure_rung(w) is None
    assert work_evidence.derive_work_record(3, w, lambda _r, _i: 0.6) == work_evidence.derive_v1(
        3, w, lambda _r, _i: 0.6
    )


def test_a_self_attested_failure_is_the_agents_own_word() -> None:
    agent = "ts1_" + "3" * 40
    payload = make_work_record(
        reporter=agent, agent=agent, task_ref="T", claimed_outcome="failed", finished_at=_at(0)
    )
    predicate = statements.parse_statement(payload).predicate
    assert isinstance(predicate, WorkRecord)
    [item] = work_evidence.derive_work_record(0, predicate, lambda _r, _i: 1.0)
    assert (item.result, item.source, item.extra_weight) == ("failure", "self-reported", RUNG_WEIGHT[1] * 0.4)
