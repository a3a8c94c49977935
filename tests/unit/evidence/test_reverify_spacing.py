"""Fresh re-verification items are spaced like sittings (policy standing-v4).

Every accepted exam report of an agent with an endpoint gets a re-verification run, and each run asks
``TRUSTSCORE_REVERIFY_K_FRESH`` fresh generator items, each its own evidence item (key
``exam:{generator}:fresh-<signature>``), which standing-v3 counted at full weight: a rule-based program
that passes the delivery generator, posting report variants a minute apart, drowned 20 deliveries an
approved marketplace had reported as rejected (delivery 0 -> 94.5, total 0 -> 202 after 50 runs under
trustscore-v2) — the sittings-again attack that standing-v3 closed, through another door (found by an
adversarial audit, 2026-12-07). Now a run's fresh items weigh ``1 − 2^(−Δ/30 days)``, Δ the time since
the agent's previous run with fresh items in that dimension, as sittings do on a track of their own.
"""

from __future__ import annotations

import base64
import hashlib
import json

import msgspec
import pytest

from tests.unit.evidence.test_sitting_spacing import MODELS, World, _at
from trustscore.errors import InvalidInput
from trustscore.evidence.project_log import ProjectionState
from trustscore.evidence.standing import HALF_LIFE_DAYS
from trustscore.exams.loader import DEFAULT_PUBLIC_DIR, parse_exam
from trustscore.kinds.reverification import PrivateItem, ReverifiedItem, make_reverification
from trustscore.kinds.reverification.security import SecurityState
from trustscore.kinds.service_card import make_service_card
from trustscore.ledger import keys, statements
from trustscore.reverify.evidence import ISSUER, is_fresh


def _fresh_id(run: int, k: int) -> str:
    """A fresh instance's id as reverify/fresh.py makes it: ``fresh-`` + a base64url Ed25519 signature."""
    signature = hashlib.sha512(f"{run}/{k}".encode()).digest()
    return "fresh-" + base64.urlsafe_b64encode(signature).decode().rstrip("=")


class Reverified(World):
    """The same world, with the re-verification key registered, and runs of A's delivery@1 reports."""

    def __init__(self) -> None:
        super().__init__()
        self.rv = keys.SigningKey.generate()
        self._add(make_service_card(self.rv.public_key, "rv", ["reverify"]), self.rv, self.log_key)
        self.runs = 0

    def run(self, days: float, fresh_millis: int = 1000) -> None:
        """A report-triggered run at ``days``: six re-asked items matched, three fresh delivery items."""
        n = self.runs = self.runs + 1
        report_index = len(self.envelopes) - 1  # (any earlier entry stands in for the report variant)
        fresh = [
            PrivateItem(exam="json-record@1", exam_digest="sha256:" + "cd" * 32, item_id=_fresh_id(n, k),
                        dimension="delivery", grader="json-deliverable@1", value_millis=fresh_millis,
                        result="success" if fresh_millis == 1000 else "failure", error=None)
            for k in range(3)
        ]  # fmt: skip
        items = [
            ReverifiedItem(item_id=f"del-{k}", dimension="delivery", reported_millis=1000,
                           observed_millis=1000, matched=True, error=None)
            for k in range(6)
        ]  # fmt: skip
        self._add(
            make_reverification(
                verifier=self.rv.id, agent=self.agent.id, report_index=report_index,
                report_sha256=hashlib.sha256(f"variant-{n}".encode()).hexdigest(), exam="delivery",
                exam_version=1, exam_digest="sha256:" + "ab" * 32, endpoint="https://solver.example/ask",
                trigger="report", checkpoint_size=report_index + 2,
                checkpoint_root=hashlib.sha256(f"root-{n}".encode()).digest(), items=items,
                private_items=fresh, security_before=SecurityState(),
                ran_at=statements.format_time(_at(days)),
            ),
            self.rv,
        )  # fmt: skip

    def fresh_weights(self) -> list[float]:
        return [d.extra_weight for d in self.evidence if d.key is not None and ":fresh-" in d.key]


def _delivery_and_total(world: World) -> dict[str, tuple[float, int | None]]:
    rating = world.rate(_at(20.1))
    return {m: (rating[m].dimensions["delivery"] or 0.0, rating[m].total) for m in MODELS}


def test_runs_a_minute_apart_add_what_one_run_adds() -> None:
    one, many = Reverified(), Reverified()
    one.run(20)
    for n in range(50):
        many.run(20 + n / 1440)
    once, fifty = _delivery_and_total(one), _delivery_and_total(many)
    for model in MODELS:
        assert fifty[model][0] <= once[model][0] + 1.0, (model, once, fifty)
        assert (fifty[model][1] or 0) <= (once[model][1] or 0) + 5, (model, once, fifty)
    weights = many.fresh_weights()
    assert weights[:3] == [1.0] * 3 and len(weights) <= 3 * 50
    assert sum(weights) < 3 * 1.1  # 49 more runs a minute apart add less than a tenth of one run


def test_a_run_a_half_life_later_weighs_half_and_failures_still_fail() -> None:
    world = Reverified()
    world.run(20)
    world.run(20 + HALF_LIFE_DAYS)
    world.projected()
    assert world.fresh_weights() == [1.0] * 3 + [0.5] * 3
    failing = Reverified()
    for day in range(6):
        failing.run(20 + day * 7, fresh_millis=0)
    rating = failing.rate(_at(60))["trustscore-v2"]
    assert rating.dimensions["delivery"] == 0.0  # failing fresh items still count as failures


def test_a_sitting_and_a_run_are_spaced_apart() -> None:
    """Sittings and runs are two tracks: a run does not take a sitting's room, nor the reverse (each
    bounded on its own: an honest agent that reports, is re-verified and sits is not penalised)."""
    world = Reverified()
    world.run(20)
    world.sit(20.001)
    world.projected()
    assert world.sitting_weights() == [1.0] * 6 and world.fresh_weights() == [1.0] * 3


def test_replay_spaces_later_runs_as_derivation_does() -> None:
    world = Reverified()
    for day in (20, 20.5, 27, 60):
        world.run(day)
    state = world.projected()
    replayed = ProjectionState(world.log_key.public_key)
    for d in world.evidence:
        replayed.feed_evidence(msgspec.structs.replace(d), d.index)
    at, index = _at(61), len(world.envelopes)
    assert replayed.standing.fresh_weight(world.agent.id, "delivery", index, at) == (
        state.standing.fresh_weight(world.agent.id, "delivery", index, at)
    )


def test_an_exam_items_id_is_never_taken_for_a_fresh_instance() -> None:
    """A private set's item may not be named ``fresh-…`` (the loader refuses it), and a short one never
    reads as fresh (fresh ids are longer than any exam file's): it is replaced by key, never spaced."""
    assert is_fresh(ISSUER, f"exam:json-record@1:{_fresh_id(1, 0)}")
    assert not is_fresh(ISSUER, "exam:private-set@1:fresh-q1")
    assert not is_fresh(None, f"exam:json-record@1:{_fresh_id(1, 0)}")  # a graded report's item


def test_the_loader_refuses_an_item_named_like_a_fresh_instance() -> None:
    data = json.loads((DEFAULT_PUBLIC_DIR / "delivery" / "v1.json").read_text())
    data["items"][0]["id"] = "fresh-q1"
    with pytest.raises(InvalidInput, match="ids starting 'fresh-' are reserved for fresh instances"):
        parse_exam(json.dumps(data).encode())
