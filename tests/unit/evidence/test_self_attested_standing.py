"""An agent's own word about itself never has standing (policy standing-v2).

Under standing-v1 a self-attested work record went the way of its reporter, and the reporter of a
self-attested record is the agent itself (or a key of its interest). An agent that had earned standing
(rated >= 500 for 30 days and vouched by one report of a reporter with standing: an approved marketplace's
`rejected` event was enough) then counted every "done" claim about itself at full weight, outside the
pool and with no bound on their number: 1,000 records, each naming a new task and a CI confirmation it
made up, lifted its trustscore-v2 total 650 -> 780 and its delivery 0 -> 87 (found by an adversarial
review, 2026-12-07). Now a self-attested record always goes to the subject's pool, whoever signed it.

The log is built signed and projected with ``verify=True`` (signatures and admission as the export and
the server check them), then scored with the served models.
"""

from __future__ import annotations

import datetime as dt

import msgspec
import pytest

from tests.unit.evidence.signed import new_id
from tests.unit.evidence.test_standing import approval
from trustscore.cli.agent import card_envelope
from trustscore.evidence.derive import evidence_batch
from trustscore.evidence.project_log import ProjectionState, project
from trustscore.evidence.standing import POOL_ISSUER
from trustscore.kinds.approvals import make_approval
from trustscore.kinds.events import EventName, make_event
from trustscore.kinds.graded import GradedItem, make_graded_evidence
from trustscore.kinds.parties import make_party_card
from trustscore.kinds.service_card import make_service_card
from trustscore.kinds.snapshots import SnapshotRow, make_rating_snapshot
from trustscore.kinds.work_records import Confirmation, make_work_record
from trustscore.ledger import dsse, keys, statements
from trustscore.scoring import Rating, score_agents
from trustscore.scoring.inputs import EvidenceItem
from trustscore.services.ratings import load_models

MODELS = load_models()
START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
DIMENSIONS = ("capability", "reliability", "security", "negotiation", "integrity", "delivery")


def _at(days: float) -> dt.datetime:
    return START + dt.timedelta(days=days)


class World:
    """A log in which agent A (and ``others`` agents beside it) sit well graded exams (delivery all
    failed) over 31 days, with trustscore-v2 snapshots of their ratings, and an approved marketplace M."""

    def __init__(self, others: int = 0) -> None:
        self.log_key = keys.SigningKey.generate()
        self.service = keys.SigningKey.generate()
        self.agent = keys.SigningKey.generate()
        self.others = [keys.SigningKey.generate() for _ in range(others)]
        self.market = keys.SigningKey.generate()
        self.envelopes: list[dsse.Envelope] = []
        self._add(
            make_service_card(self.service.public_key, "svc", ["grader", "snapshot"]),
            self.service,
            self.log_key,
        )
        self.envelopes.append(card_envelope(self.agent, "agent-a"))
        for n, other in enumerate(self.others):  # (no controller: nothing ties them to A)
            self.envelopes.append(card_envelope(other, f"agent-{n}"))
        self._add(make_party_card(self.market.public_key, "market", "marketplace"), self.market)
        for day in (0, 15, 31):
            self._graded(day)
            self._snapshot(day)
        self._add(
            make_approval(operator=self.log_key.id, marketplace=self.market.id, action="approve"),
            self.log_key,
        )

    def _add(self, payload: bytes, *signers: keys.SigningKey) -> None:
        self.envelopes.append(dsse.sign(payload, list(signers)))

    def _graded(self, day: int) -> None:
        for agent in (self.agent, *self.others):
            self._graded_one(agent, day)

    def _graded_one(self, agent: keys.SigningKey, day: int) -> None:
        items = [
            GradedItem(
                item_id=f"d{day}-{dimension}-{i}",
                dimension=dimension,
                grader="exact@1",
                value_millis=0 if dimension == "delivery" else 1000,
                result="failure" if dimension == "delivery" else "success",
            )
            for dimension in DIMENSIONS
            for i in range(6)
        ]
        self._add(
            make_graded_evidence(
                grader=self.service.id,
                agent=agent.id,
                report_index=0,
                report_sha256="ab" * 32,
                exam="x",
                exam_version=1,
                exam_digest="sha256:" + "cd" * 32,
                tier="private",
                graded_at=statements.format_time(_at(day)),
                items=items,
            ),
            self.service,
        )

    def _snapshot(self, day: int) -> None:
        rows = []
        for agent in sorted((self.agent, *self.others), key=lambda k: k.id):
            rating = self.rate(_at(day), agent.id)["trustscore-v2"]
            rows.append(SnapshotRow(agent=agent.id, total=rating.total, adjusted=rating.adjusted))
        self._add(
            make_rating_snapshot(
                signer=self.service.id,
                model_version="trustscore-v2",
                weights_digest="ab" * 32,
                log_size=len(self.envelopes),
                taken_at=statements.format_time(_at(day)),
                ratings=rows,
            ),
            self.service,
        )

    def vouch(
        self, agent: keys.SigningKey | None = None, event: EventName = "delivered", ref: str | None = None
    ) -> None:
        """One report about A (or ``agent``) by the approved marketplace: a vouch if it is a success."""
        at = statements.format_time(_at(31))
        self._add(
            make_event(
                marketplace=self.market.id,
                agent=(agent or self.agent).id,
                event=event,
                ref=ref or f"order-{len(self.envelopes)}",
                occurred_at=at,
            ),
            self.market,
        )

    def retire(self) -> None:
        """The operator retires the marketplace."""
        self._add(
            make_approval(operator=self.log_key.id, marketplace=self.market.id, action="retire"),
            self.log_key,
        )

    def claim(self, n: int) -> None:
        """``n`` self-attested "done" records, each a new task with a CI confirmation of A's own making."""
        for i in range(n):
            self._add(
                make_work_record(
                    reporter=self.agent.id,
                    agent=self.agent.id,
                    attestation="self",
                    task_ref=f"task-{i}",
                    claimed_outcome="done",
                    finished_at=statements.format_time(_at(31.04)),
                    confirmations=[Confirmation(kind="ci", ref=f"ci-{i}", status="success")],
                ),
                self.agent,
            )

    def projected(self) -> None:
        """The whole log projected again from its start (its evidence in :attr:`evidence`)."""
        state = ProjectionState(self.log_key.public_key)
        leaves = [(i, msgspec.json.encode(e)) for i, e in enumerate(self.envelopes)]
        out = project(leaves, state, verify=True)
        assert not out.rejected, out.rejected
        self.evidence = out.evidence

    def rate(self, at: dt.datetime, agent: str | None = None) -> dict[str, Rating]:
        """A's (or ``agent``'s) rating under each served model at ``at``."""
        self.projected()
        batch = evidence_batch(self.evidence)
        who = self.agent.id if agent is None else agent
        return {
            model: next(r for r in score_agents(batch, None, weights, at) if r.agent == who)
            for model, weights in MODELS.items()
        }


@pytest.mark.parametrize("vouched", [False, True], ids=["no standing", "standing"])
def test_an_agents_own_claims_stay_in_its_pool(vouched: bool) -> None:
    world = World()
    if vouched:
        world.vouch()
    at = _at(31.08)
    before = world.rate(at)
    world.claim(300)
    after = world.rate(at)
    claims = [d for d in world.evidence if d.key is not None and d.key.startswith("work:")]
    assert len(claims) >= 1 and all(d.issuer == POOL_ISSUER for d in claims), {d.issuer for d in claims}
    for model in MODELS:
        old, new = before[model].total, after[model].total
        assert old is not None and new is not None
        moved = new - old
        # The pool's bound on what reporters without standing move (23.1 points: docs/methodology.md);
        # standing-v1 moved the total by 99 (v2) and 80 (baseline) with standing here.
        assert moved <= 23, (model, old, new)


def test_a_replay_vouches_as_derivation_does() -> None:
    """The projector's replay of stored evidence (after a restart) vouches as derivation does: by an
    approved marketplace's report only, never by a self-attested item or a rated reporter's report."""
    world = World()
    state = ProjectionState(world.log_key.public_key)
    state.feed_approval(1, approval(world.market.id, "approve"))
    agent, other, rated = world.agent.id, new_id(), new_id()
    claim = EvidenceItem(
        agent=agent,
        dimension="delivery",
        source="self-reported",
        at=_at(31),
        value=1.0,
        result="success",
        key=f"work:{agent}:task-1",
        issuer=agent,
        extra_weight=0.4,
    )
    state.feed_evidence(claim, 5)  # an agent's claim about itself: no vouch
    state.feed_evidence(msgspec.structs.replace(claim, key=f"work:{agent}:task-2", issuer=POOL_ISSUER), 6)
    by_market = msgspec.structs.replace(claim, source="real", key="event", issuer=world.market.id)
    state.feed_evidence(by_market, 7)  # the approved marketplace: standing in both, and a vouch
    about_other = msgspec.structs.replace(claim, agent=other, source="real", key="s1", issuer=rated)
    state.feed_evidence(about_other, 8)  # a rated reporter no marketplace vouched for: no vouch
    state.feed_evidence(msgspec.structs.replace(by_market, agent=rated), 9)  # now one has
    state.feed_evidence(msgspec.structs.replace(about_other, key="s2"), 10)  # standing in both
    assert state.standing.vouched_at(agent) == 7 and state.standing.vouched_at(rated) == 9
    assert state.standing.vouched_at(other) is None
