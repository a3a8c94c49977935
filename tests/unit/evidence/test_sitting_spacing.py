"""An agent's sittings in one dimension weigh together at most one fresh sitting (policy standing-v3).

Under standing-v2 each sitting close added its items at full weight (`verified`, 0.9), and an agent may sit
an exam as often as it likes, each sitting with fresh items. A rule-based program passes the delivery,
reliability and security generators (their prompts state what the grader checks), so it could sit them
again and again until the exam evidence drowned what approved marketplaces had reported: 20 failed
deliveries (total 0, delivery 0) became delivery 84 after five sittings of ``delivery@1`` (found by an
adversarial review, 2026-12-07). Now a sitting's items weigh ``1 − 2^(−Δ/30 days)``, Δ the time from the
agent's newest sitting in that dimension that closed before this one opened: sitting again at once adds
next to nothing, a sitting a month later half; sittings open together weigh alike (a review found that
spacing by close order gave a free best of four), and decayed, the sittings never outweigh as many
fresh sittings as can be open at once.

The log is built signed and projected with ``verify=True``, then scored with the served models.
"""

from __future__ import annotations

import datetime as dt
import hashlib

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from trustscore.cli.agent import card_envelope
from trustscore.evidence.derive import evidence_batch
from trustscore.evidence.project_log import ProjectionState, project
from trustscore.evidence.standing import HALF_LIFE_DAYS, Standing
from trustscore.kinds.approvals import make_approval
from trustscore.kinds.events import make_event
from trustscore.kinds.graded import GradedItem
from trustscore.kinds.parties import make_party_card
from trustscore.kinds.service_card import make_service_card
from trustscore.kinds.sittings import SittingClose, make_close
from trustscore.ledger import dsse, keys, statements
from trustscore.scoring import Rating, score_agents
from trustscore.scoring.inputs import DerivedEvidence
from trustscore.services.ratings import load_models

MODELS = load_models()
START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


def _at(days: float) -> dt.datetime:
    return START + dt.timedelta(days=days)


class World:
    """A log in which an approved marketplace reported 20 failed deliveries of agent A (days 0..19)."""

    def __init__(self) -> None:
        self.log_key = keys.SigningKey.generate()
        self.service = keys.SigningKey.generate()
        self.agent = keys.SigningKey.generate()
        self.market = keys.SigningKey.generate()
        self.envelopes: list[dsse.Envelope] = []
        self._add(make_service_card(self.service.public_key, "svc", ["grader"]), self.service, self.log_key)
        self.envelopes.append(card_envelope(self.agent, "agent-a"))
        self._add(make_party_card(self.market.public_key, "market", "marketplace"), self.market)
        self._add(
            make_approval(operator=self.log_key.id, marketplace=self.market.id, action="approve"),
            self.log_key,
        )
        for day in range(20):
            self._add(
                make_event(
                    marketplace=self.market.id,
                    agent=self.agent.id,
                    event="rejected",
                    ref=f"order-{day}",
                    occurred_at=statements.format_time(_at(day)),
                ),
                self.market,
            )
        self.evidence: list[DerivedEvidence] = []

    def _add(self, payload: bytes, *signers: keys.SigningKey) -> None:
        self.envelopes.append(dsse.sign(payload, list(signers)))

    def sit(
        self, days: float, value_millis: int = 1000, exam: str = "delivery@1", opened: int | None = None
    ) -> None:
        """A's sitting of ``exam`` closed at ``days``: six delivery items, each graded ``value_millis``;
        opened at log index ``opened``, by default the entry just before this close (a card of A's
        standing in for the open: closes are admitted on their own)."""
        if opened is None:
            opened = len(self.envelopes)
            self.envelopes.append(card_envelope(self.agent, "agent-a"))
        secret = hashlib.sha256(f"{len(self.envelopes)}".encode()).digest()
        sitting = opened
        close = SittingClose(
            nonce=f"sitting-close-{sitting:020d}",
            issued_at=statements.format_time(_at(days)),
            service=self.service.id,
            agent=self.agent.id,
            sitting=sitting,
            exam=exam,
            commitment=hashlib.sha256(secret).hexdigest(),
            secret=secret.hex(),
            root="ab" * 32,
            items_digest="sha256:" + "cd" * 32,
            outcome="reported",
            report_index=len(self.envelopes) - 1,
            report_sha256="ef" * 32,
            closed_at=statements.format_time(_at(days)),
            items=[
                GradedItem(
                    item_id=f"del{n}",
                    dimension="delivery",
                    grader="json-deliverable@1",
                    value_millis=value_millis,
                    result="success" if value_millis == 1000 else "failure",
                )
                for n in range(1, 7)
            ],
            dialogues={},
        )
        self._add(make_close(close), self.service)

    def projected(self) -> ProjectionState:
        state = ProjectionState(self.log_key.public_key)
        leaves = [(i, msgspec.json.encode(e)) for i, e in enumerate(self.envelopes)]
        out = project(leaves, state, verify=True)
        assert not out.rejected, out.rejected
        self.evidence = out.evidence
        return state

    def rate(self, at: dt.datetime) -> dict[str, Rating]:
        self.projected()
        batch = evidence_batch(self.evidence)
        return {
            model: next(r for r in score_agents(batch, None, weights, at) if r.agent == self.agent.id)
            for model, weights in MODELS.items()
        }

    def sitting_weights(self) -> list[float]:
        return [d.extra_weight for d in self.evidence if d.key is not None and d.key.startswith("sitting:")]


def _delivery(rating: Rating) -> float:
    score = rating.dimensions["delivery"]
    assert score is not None
    return score


@pytest.mark.parametrize("sittings", [5, 50])
def test_sitting_again_and_again_does_not_drown_a_marketplaces_failures(sittings: int) -> None:
    once, many = World(), World()
    once.sit(20)
    for n in range(sittings):  # a program sits as fast as the server closes its sittings
        many.sit(20 + n * 30 / 86_400)
    at = _at(20.1)
    one, all_of_them = once.rate(at), many.rate(at)
    weights = many.sitting_weights()
    assert len(weights) <= 6 * sittings and weights[:6] == [1.0] * 6
    assert sum(weights) < 6 * 1.01, weights  # every later sitting together: under 1 % of the first
    for model in MODELS:
        # Under standing-v2 (measured): one sitting gives trustscore-v2 delivery 40.6, total 61 (0 and 0
        # before it); 5 sittings 77.3 and 116, 50 sittings 97.2 and 146 (baseline-v0.3: 35.1 / 30, then
        # 73.0 / 63 and 96.4 / 83). Now 5 or 50 give what one gives.
        assert _delivery(all_of_them[model]) - _delivery(one[model]) < 0.5, model
        old, new = one[model].total, all_of_them[model].total
        assert old is not None and new is not None and new - old <= 1, (model, old, new)


def test_a_sitting_at_the_same_time_as_the_newest_adds_nothing_and_a_late_one_half() -> None:
    world = World()
    world.sit(20)
    world.sit(20)  # (the same closed_at: weight 0, its items dropped)
    world.sit(20 + HALF_LIFE_DAYS)
    world.sit(10)  # (closed before the newest: weight 0)
    world.projected()
    assert world.sitting_weights() == [1.0] * 6 + [0.5] * 6


def test_spaced_sittings_are_weighed_by_their_spacing_and_fail_as_they_pass() -> None:
    world = World()
    for week in range(6):
        world.sit(20 + 7 * week, value_millis=0)  # honest, weekly, and failing
    world.projected()
    weights = world.sitting_weights()
    expected = 1 - 0.5 ** (7 / HALF_LIFE_DAYS)
    assert weights[:6] == [1.0] * 6
    assert all(abs(w - expected) < 1e-15 for w in weights[6:]) and len(weights) == 36
    rating = world.rate(_at(60))["trustscore-v2"]
    assert _delivery(rating) == 0.0  # failing sittings still count as failures


def test_replay_spaces_later_sittings_as_derivation_does() -> None:
    world = World()
    for day in (20, 20.5, 27, 27, 60):
        world.sit(day)
    state = world.projected()
    replayed = ProjectionState(world.log_key.public_key)
    for d in world.evidence:
        replayed.feed_evidence(d, d.index)
    # the next sitting after a replay gets the weight a projection from the start gives it
    at = _at(61)
    index = len(world.envelopes)
    assert replayed.standing.sitting_weight(world.agent.id, "delivery", index, index - 1, at) == (
        state.standing.sitting_weight(world.agent.id, "delivery", index, index - 1, at)
    )


def test_sittings_open_together_weigh_alike_whichever_the_agent_closes_first() -> None:
    """An agent may hold several sittings open and read every one's prompts before it reports. Spacing by
    close order let it report the one it could pass first (weight 1) and let the others expire at next
    to no weight: a free best of four (found by review). Sittings open at the same time see the same
    earlier closes, so each weighs the same whatever the order."""
    ratings = {}
    for order in ("good first", "failures first"):
        world = World()
        first_open = len(world.envelopes)  # four opens, then their closes (an open is not evidence)
        values = [1000, 0, 0, 0] if order == "good first" else [0, 0, 0, 1000]
        for n, value in enumerate(values):
            world.sit(20 + n / 1440, value_millis=value, opened=first_open - 4 + n)
        world.projected()
        assert world.sitting_weights() == [1.0] * 24
        ratings[order] = world.rate(_at(20.1))
    for model in MODELS:
        assert ratings["good first"][model].total == ratings["failures first"][model].total, model
    # and a sitting opened after those closed is spaced from them
    world.sit(20.5, opened=len(world.envelopes) - 1)
    world.projected()
    assert 0 < world.sitting_weights()[-1] < 0.02


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(min_value=1, max_value=20 * 86_400_000_000), st.integers(0, 3)),
        min_size=1,
        max_size=40,
    )
)
def test_sittings_decayed_to_the_newest_weigh_at_most_as_many_as_can_be_open(
    steps: list[tuple[int, int]],
) -> None:
    """Each step opens a sitting and closes one of those open (at most 4 open at once, the server's
    default), after a gap: decayed to the newest close, the closes weigh at most 4 fresh sittings."""
    standing = Standing()
    index, now = 0, 0
    open_at: list[int] = []  # open indexes of the sittings open
    closes: list[tuple[float, int]] = []
    for gap, pick in steps:
        open_at.append(index)
        index += 1
        if len(open_at) < 4 and pick % 2:
            continue  # keep it open for now
        opened = open_at.pop(pick % len(open_at))
        now += gap
        weight = standing.sitting_weight(
            "a", "delivery", index, opened, START + dt.timedelta(microseconds=now)
        )
        index += 1
        assert 0.0 <= weight <= 1.0
        closes.append((weight, now))
    decayed = sum(w * 0.5 ** ((now - t) / (HALF_LIFE_DAYS * 86_400_000_000)) for w, t in closes)
    assert decayed <= 4 + 1e-9
