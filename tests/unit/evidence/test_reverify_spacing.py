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
from trustscore.evidence.derive import evidence_batch
from trustscore.evidence.project_log import ProjectionState
from trustscore.evidence.standing import HALF_LIFE_DAYS
from trustscore.exams.loader import DEFAULT_PUBLIC_DIR, parse_exam
from trustscore.kinds.reverification import PrivateItem, ReverifiedItem, make_reverification, security
from trustscore.kinds.reverification.security import SecurityState
from trustscore.kinds.service_card import make_service_card
from trustscore.ledger import keys, statements
from trustscore.reverify.evidence import ISSUER, is_fresh
from trustscore.scoring.medals import find_medal_rules, medals_of
from trustscore.scoring.times import to_micros
from trustscore.services.ratings import DEFAULT_WEIGHTS_DIR


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
        fresh = [
            PrivateItem(exam="json-record@1", exam_digest="sha256:" + "cd" * 32, item_id=_fresh_id(n, k),
                        dimension="delivery", grader="json-deliverable@1", value_millis=fresh_millis,
                        result="success" if fresh_millis == 1000 else "failure", error=None)
            for k in range(3)
        ]  # fmt: skip
        self.log_run(days, "delivery", fresh)

    def log_run(
        self, days: float, exam: str, private: list[PrivateItem], before: SecurityState | None = None
    ) -> None:
        """Log run number ``self.runs`` at ``days``: six items of a report of ``exam`` re-asked and
        matched, and ``private`` asked (the report variant is any earlier entry)."""
        n, report_index = self.runs, len(self.envelopes) - 1
        items = [
            ReverifiedItem(item_id=f"{exam[:3]}-{k}", dimension=exam, reported_millis=1000,
                           observed_millis=1000, matched=True, error=None)
            for k in range(6)
        ]  # fmt: skip
        self._add(
            make_reverification(
                verifier=self.rv.id, agent=self.agent.id, report_index=report_index,
                report_sha256=hashlib.sha256(f"variant-{n}".encode()).hexdigest(), exam=exam,
                exam_version=1, exam_digest="sha256:" + "ab" * 32, endpoint="https://solver.example/ask",
                trigger="report", checkpoint_size=report_index + 2,
                checkpoint_root=hashlib.sha256(f"root-{n}".encode()).digest(), items=items,
                private_items=private, security_before=before or SecurityState(),
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
    world = Asked()
    for day in (20, 20.5, 27, 60):
        world.run(day)
        world.ask(day + 0.1, {"p0": 1000 if day > 20 else 0, "p1": 0 if day > 27 else 1000}, "delivery")
    state = world.projected()
    replayed = ProjectionState(world.log_key.public_key)
    for d in world.evidence:
        replayed.feed_evidence(msgspec.structs.replace(d), d.index)
    at, index = _at(61), len(world.envelopes)
    assert replayed.standing.fresh_weight(world.agent.id, "delivery", index, at) == (
        state.standing.fresh_weight(world.agent.id, "delivery", index, at)
    )
    for item in ("p0", "p1", "p2"):  # and counts the same answers to private items next
        key = f"reverify:private:private-set@1:{item}"
        for value in (0.0, 0.5, 1.0):
            assert replayed.standing.private_answer(world.agent.id, key, value) == (
                state.standing.private_answer(world.agent.id, key, value)
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


class Asked(Reverified):
    """Runs that ask items of a fixed private set (the same ids every time, as the server's private sets
    are), with the security state carried from run to run as the server carries it."""

    security = SecurityState()

    def ask(self, days: float, answers: dict[str, int], dimension: str = "capability") -> None:
        """A report-triggered run at ``days`` asking the private items ``answers`` names (id -> millis)."""
        self.runs += 1
        private = [
            PrivateItem(exam="private-set@1", exam_digest="sha256:" + "cd" * 32, item_id=item_id,
                        dimension=dimension, grader="exact-answer@1", value_millis=millis,
                        result="success" if millis == 1000 else "failure", error=None)
            for item_id, millis in answers.items()
        ]  # fmt: skip
        self.log_run(days, "reliability", private, self.security)
        if dimension == "security":
            failed = any(m < 1000 for m in answers.values())
            self.security = security.step(self.security, "fail" if failed else "pass")

    def weights(self, dimension: str) -> list[float]:
        return [d.extra_weight for d in self.evidence if d.issuer == ISSUER and d.dimension == dimension
                and d.key is not None and not d.key.startswith("reverify:standing")]  # fmt: skip


def test_private_items_learnt_from_their_published_grades_add_what_one_run_adds() -> None:
    """The harvest (adversarial audit, 2026-12-08): each run asks 3 of 12 fixed private items and the log
    publishes each item's grade, so an endpoint guesses, reads its grades back and answers from memory;
    report variants a minute apart bring runs. Under standing-v4 a newer answer replaced the older one
    at full weight: capability 0 -> 100, total 30 -> 260 after 43 runs. Now a run's private items are
    spaced like its fresh ones and never replace an earlier answer: the first, guessed, run counts."""
    harvest, honest = Asked(), Asked()
    known: set[str] = set()
    for n in range(44):
        asked = [f"p{(3 * n + k) % 12}" for k in range(3)]
        harvest.ask(20 + n / 1440, {i: 1000 if i in known else 0 for i in asked})
        honest.ask(20 + n / 1440, dict.fromkeys(asked, 0))
        known.update(asked)
    learnt, knew = harvest.rate(_at(20.1)), honest.rate(_at(20.1))
    for model in MODELS:
        assert (learnt[model].dimensions["capability"] or 0) <= (
            knew[model].dimensions["capability"] or 0
        ) + 1
        assert (learnt[model].total or 0) <= (knew[model].total or 0) + 5, (model, learnt, knew)
    weights = harvest.weights("capability")
    assert weights[:3] == [1.0] * 3 and sum(weights) < 3 * 1.1


def test_a_private_item_counts_its_first_answer_and_one_lower_one() -> None:
    """The first answer to a private item counts and is never replaced: a later better one may come from
    memory (its grade is in the log) and counts for nothing; the first later worse one is a regression and
    counts once, as does nothing after it. So an item is at most two evidence items (and two ladder rows),
    however often it is asked, and one learnt item is never three of a medal's real items."""
    world = Asked()
    world.ask(20, {"p0": 0, "p1": 1000})
    world.ask(20 + HALF_LIFE_DAYS, {"p0": 1000, "p1": 0})
    world.ask(20 + 2 * HALF_LIFE_DAYS, {"p0": 1000, "p1": 0})
    world.projected()
    assert [(d.key, d.value, d.extra_weight) for d in world.evidence if d.dimension == "capability"] == [
        ("reverify:private:private-set@1:p0", 0.0, 1.0),
        ("reverify:private:private-set@1:p1", 1.0, 1.0),
        ("reverify:private-lower:private-set@1:p1", 0.0, 0.5),
    ]
    learnt = Asked()
    for n in range(3):
        learnt.ask(20 + n / 1440, {"p0": 1000})
    rating = learnt.rate(_at(20.1))["trustscore-v2"]
    rules = find_medal_rules(DEFAULT_WEIGHTS_DIR, MODELS["trustscore-v2"])
    assert rules is not None
    [medals] = medals_of(evidence_batch(learnt.evidence), [rating], rules, to_micros(_at(20.1)))
    assert medals.dimensions["capability"].real_n == 1


def test_a_memorisers_private_gaps_count_in_full() -> None:
    """Review of standing-v5 (2026-12-08): the first version spaced the private-gap judgement, so after six
    public reports re-verified a minute apart (each replaying its public answers and failing every private
    item) five of the six gap failures weighed 3e-5, and the memoriser earned a silver integrity medal. A
    gap is one item per exam version again, unspaced, and its strike stays when a later run closes it."""
    world = Asked()
    for n in range(6):
        world.runs += 1
        private = [
            PrivateItem(exam="private-set@1", exam_digest="sha256:" + "cd" * 32, item_id=f"q{n}-{k}",
                        dimension="capability", grader="exact-answer@1", value_millis=0, result="failure",
                        error=None)
            for k in range(3)
        ]  # fmt: skip
        world.log_run(20 + n / 1440, ["capability", "reliability", "delivery", "security", "negotiation",
                                      "integrity"][n], private)  # fmt: skip
    world.projected()
    gaps = [(d.key, d.value, d.extra_weight) for d in world.evidence if d.key and "private-gap" in d.key]
    assert len(gaps) == 6 and all(value == 0.0 and weight == 1.0 for _, value, weight in gaps), gaps
    rating = world.rate(_at(20.1))["trustscore-v2"]
    rules = find_medal_rules(DEFAULT_WEIGHTS_DIR, MODELS["trustscore-v2"])
    assert rules is not None
    [medals] = medals_of(evidence_batch(world.evidence), [rating], rules, to_micros(_at(20.1)))
    assert medals.dimensions["integrity"].medal is None, (rating.dimensions, medals.dimensions["integrity"])


def test_failed_security_runs_between_passing_ones_count() -> None:
    """Adversarial audit, 2026-12-08: a failed security run was held back while it only started a
    downgrade streak, and a passing run reset the streak, so failing two runs in three never counted a
    failure (security 100, status passed). Now every run's security items count, spaced like the rest."""
    mixed, first = Asked(), Asked()
    pattern = [True, False, False] * 10
    for world, runs in ((mixed, pattern), (first, sorted(pattern))):
        for n, ok in enumerate(runs):
            world.ask(20 + n, {f"s{n % 4}": 1000 if ok else 0}, dimension="security")
    interleaved = mixed.rate(_at(50))["trustscore-v2"].dimensions["security"]
    ordered = first.rate(_at(50))["trustscore-v2"].dimensions["security"]
    assert interleaved is not None and interleaved < 60, interleaved
    assert ordered is not None and abs(interleaved - ordered) < 25, (interleaved, ordered)
