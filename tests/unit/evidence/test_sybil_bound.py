"""The published Sybil bound (docs/methodology.md, "Reporter standing"): N colluding fresh keys move no
agent's total by more than 25 points of 1000, whatever N, under every served model.

Rings of 3, 20 and 200 fresh keys — counterparties, self-registered (unapproved) marketplaces and
undeclared second keys of the agent itself — each post perfect (or failing) reports about a fresh agent
and about an established one; the log is derived with the standing policy and rated with each served
model. Run with ``-s`` to print the measured worst case per N and model (the figures in the docs).
Before the policy, 20 counterparties lifted a fresh agent from no rating to ~330 (issue #10).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from itertools import count

import pytest

from tests.unit.evidence.signed import DIGEST, T0, Log, graded
from trustscore.evidence import derive_log, evidence_batch
from trustscore.evidence.standing import POOL_ISSUER, REPORTER_MODEL
from trustscore.kinds.approvals import make_approval
from trustscore.kinds.events import EventName, make_event
from trustscore.kinds.graded import GradedItem
from trustscore.kinds.settlements import make_settlement
from trustscore.kinds.snapshots import SnapshotRow, make_rating_snapshot
from trustscore.ledger import keys
from trustscore.scoring import Weights, score_agents
from trustscore.scoring.inputs import SnapshotBatch
from trustscore.services.ratings import load_models

SERVED = load_models()
OFFLINE = load_models(names=["trustscore-v1"])
RATE_AT = dt.datetime(2026, 3, 2, 12, tzinfo=dt.UTC)
LATE = "2026-03-02T11:00:00Z"  # the ring's reports are the freshest evidence there is
BOUND = 25
_deals = count()

Ring = Callable[[Log, keys.SigningKey, int, bool], None]


def _graded_items(value: int) -> list[GradedItem]:
    dims = ["capability", "security", "integrity", "negotiation", "reliability", "delivery", "economic"]
    return [
        GradedItem(
            item_id=f"{d}-{i}",
            dimension=d,
            grader="exact@1",
            value_millis=value,
            result="success" if value >= 500 else "failure",
        )
        for d in dims
        for i in range(4)
    ]


def world(established: bool) -> tuple[Log, keys.SigningKey]:
    """A target agent: fresh (a card and nothing else) or established (graded exams in every evidence
    dimension, settlements of a long-rated counterparty, events of an operator-approved marketplace)."""
    log = Log()
    target = log.party("target")
    if not established:
        return log, target
    svc = log.service("svc", ["grader", "snapshot"])
    log.submit(graded(target.id, grader=svc.id, tier="private", items=_graded_items(800)), svc)
    log.submit(graded(target.id, grader=svc.id, tier="public", items=_graded_items(850), exam="pub"), svc)
    rated = log.party("rated-buyer")
    for taken in ("2026-01-10T00:00:00Z", "2026-02-28T00:00:00Z"):  # rated 700 for 49 days
        snapshot = make_rating_snapshot(
            signer=svc.id,
            model_version=REPORTER_MODEL,
            weights_digest=DIGEST,
            log_size=len(log.entries),
            taken_at=taken,
            ratings=[SnapshotRow(agent=rated.id, total=700, adjusted=700)],
        )
        log.submit(snapshot, svc)
    market = log.party("approved-market", "marketplace")
    log.submit(make_approval(operator=svc.id, marketplace=market.id, action="approve"), svc)
    log.submit(_settle(market, rated, True, "seller", T0), market)  # vouches for the rated buyer
    for i in range(5):
        log.submit(_settle(rated, target, True, "buyer", T0), rated)
        log.submit(_settle(rated, target, i % 2 == 0, "seller", T0), rated)
    for name in ("delivered", "confirmed", "delivered", "rejected"):
        log.submit(_event(market, target, name, T0), market)
    return log, target


def _settle(reporter: keys.SigningKey, target: keys.SigningKey, good: bool, role: str, at: str) -> bytes:
    deal = f"deal-{next(_deals)}"
    if role == "buyer":  # the reporter bought from the target: reports its delivery
        return make_settlement(
            deal_id=deal,
            seller=target.id,
            buyer=reporter.id,
            reporter_role="buyer",
            delivery="pass" if good else "fail",
            confirmed=good,
            settled_at=at,
        )
    return make_settlement(
        deal_id=deal,
        seller=reporter.id,
        buyer=target.id,
        reporter_role="seller",
        payment="pass" if good else "fail",
        settled_at=at,
    )


def _event(market: keys.SigningKey, target: keys.SigningKey, name: EventName, at: str) -> bytes:
    return make_event(
        marketplace=market.id, agent=target.id, event=name, ref=f"o-{next(_deals)}", occurred_at=at
    )


def counterparties(log: Log, target: keys.SigningKey, n: int, good: bool) -> None:
    for i in range(n):
        key = log.party(f"sybil-{i}")
        log.submit(_settle(key, target, good, "buyer", LATE), key)
        log.submit(_settle(key, target, good, "seller", LATE), key)


def marketplaces(log: Log, target: keys.SigningKey, n: int, good: bool) -> None:
    names: list[EventName] = (
        ["delivered", "confirmed"]
        if good
        else ["rejected", "delivery_failed", "negotiation_expired", "signature_invalid"]
    )
    for i in range(n):
        key = log.party(f"market-{i}", "marketplace")
        for name in names:
            log.submit(_event(key, target, name, LATE), key)


def second_keys(log: Log, target: keys.SigningKey, n: int, good: bool) -> None:
    """The agent's own other keys (no controller declared), settling with it."""
    for i in range(n):
        key = log.party(f"alias-{i}")  # indistinguishable from a counterparty: that is the point
        for _ in range(3):
            log.submit(_settle(key, target, good, "buyer", LATE), key)


RINGS: dict[str, Ring] = {
    "counterparties": counterparties,
    "marketplaces": marketplaces,
    "second-keys": second_keys,
}


def total(log: Log, target: str, weights: Weights) -> int | None:
    out = derive_log(log.parsed())
    [rating] = score_agents(
        evidence_batch(out.evidence),
        SnapshotBatch.from_items(out.snapshots),
        weights,
        RATE_AT,
        agents=[target],
    )
    return rating.total


def movement(before: int | None, after: int | None) -> int:
    return abs((after or 0) - (before or 0))


def measure(models: dict[str, Weights]) -> dict[tuple[str, int], tuple[int, str]]:
    """Worst |Δ total| per (model, N), with the scenario that reached it."""
    worst: dict[tuple[str, int], tuple[int, str]] = {}
    for established in (False, True):
        for n in (3, 20, 200):
            for ring_name, ring in RINGS.items():
                for good in (True, False):
                    log, target = world(established)
                    before = {m: total(log, target.id, w) for m, w in models.items()}
                    ring(log, target, n, good)
                    for m, w in models.items():
                        moved = movement(before[m], total(log, target.id, w))
                        what = (
                            f"{'established' if established else 'fresh'} {ring_name} {'+' if good else '-'}"
                        )
                        if moved >= worst.get((m, n), (-1, ""))[0]:
                            worst[(m, n)] = (moved, what)
    return worst


@pytest.fixture(scope="module")
def figures() -> dict[tuple[str, int], tuple[int, str]]:
    measured = measure({**SERVED, **OFFLINE})
    print("\nworst |Δ total| of 1000 by ring size and model (scenario):")
    for (model, n), (moved, what) in sorted(measured.items()):
        print(f"  {model:14} N={n:<4} {moved:4}  ({what})")
    return measured


@pytest.mark.parametrize("model", sorted(SERVED))
@pytest.mark.parametrize("n", [3, 20, 200])
def test_no_ring_moves_a_total_more_than_the_bound(
    figures: dict[tuple[str, int], tuple[int, str]], model: str, n: int
) -> None:
    moved, what = figures[(model, n)]
    assert moved <= BOUND, f"{model}, ring of {n}: {what} moved the total by {moved}"


def test_a_fresh_agent_gets_nothing_from_a_ring() -> None:
    """The observed attack: 20 counterparties lifted a fresh agent from no rating to ~330."""
    log, target = world(established=False)
    counterparties(log, target, 20, True)
    out = derive_log(log.parsed())
    assert [d for d in out.evidence if d.agent == target.id] == []
    for weights in SERVED.values():
        assert total(log, target.id, weights) is None


def test_the_ring_shares_one_pool_whatever_its_size() -> None:
    log, target = world(established=True)
    counterparties(log, target, 200, True)
    pooled = [d for d in derive_log(log.parsed()).evidence if d.issuer == POOL_ISSUER]
    assert pooled, "the pool admits a little"
    by_dim: dict[str, float] = {}
    for d in pooled:
        by_dim[d.dimension] = by_dim.get(d.dimension, 0.0) + d.extra_weight
    assert all(w <= 1.0 for w in by_dim.values()), by_dim  # 400 reports share well under one item's weight
