"""Only an operator-approved marketplace vouches (policy standing-v2).

Under standing-v1 any reporter with standing vouched for the agents it reported about, so an agent that
had earned standing could hand it on to a second agent key of its own (another controller, or none, so
nothing ties them) which had sat exams beside it for 30 days: one settlement by A about B made B a
reporter with standing, and B's settlements about A then counted in full, with no bound on their number
(found by an adversarial review, 2026-12-07: 20 deals lifted A's trustscore-v2 total 650 -> 836, 1,000
deals -> 898). A rated reporter now needs a report about it by an approved marketplace, which the
operator answers for; reporters with standing no longer make more of themselves. The review of that
fix found one failed order on the marketplace (a `rejected` event) made the same vouch, and a vouch
outlived the marketplace's retirement: a vouch is now a success reported by a marketplace approved
then, and it counts while that marketplace stays approved.
"""

from __future__ import annotations

from tests.unit.evidence.test_self_attested_standing import MODELS, World, _at
from trustscore.evidence.standing import POOL_ISSUER
from trustscore.kinds.settlements import make_settlement
from trustscore.ledger import keys, statements


def test_a_reporter_with_standing_cannot_hand_it_to_a_key_of_its_own() -> None:
    world = World(others=1)
    (second,) = world.others
    world.vouch()  # A: standing (rated >= 500 for 31 days, one report by the approved marketplace)
    # A vouches for B with one settlement: A bought from B, delivered.
    world._add(
        make_settlement(
            deal_id="v",
            seller=second.id,
            buyer=world.agent.id,
            reporter_role="buyer",
            settled_at=statements.format_time(_at(31.01)),
            delivery="pass",
        ),
        world.agent,
    )
    at = _at(31.1)
    before = world.rate(at)
    issuers = _reports_about_a(world, second, 100)  # each deal a new item
    after = world.rate(at)
    assert issuers and set(issuers) == {POOL_ISSUER}, set(issuers)
    for model in MODELS:
        old, new = before[model].total, after[model].total
        assert old is not None and new is not None
        assert new - old <= 23, (model, old, new)  # the Sybil bound (standing-v1: +186 at 20 deals)


def _reports_about_a(world: World, second: keys.SigningKey, deals: int, first: int = 0) -> list[str | None]:
    """``deals`` settlements by ``second`` about A; the issuers their items were derived with."""
    for i in range(first, first + deals):
        world._add(
            make_settlement(
                deal_id=f"d{i}",
                seller=world.agent.id,
                buyer=second.id,
                reporter_role="buyer",
                settled_at=statements.format_time(_at(31.05)),
                delivery="pass",
                confirmed=True,
            ),
            second,
        )
    world.rate(_at(31.1))
    deals_made = {f"d{i}" for i in range(first, first + deals)}
    return [
        d.issuer
        for d in world.evidence
        if d.key is not None
        and d.key.startswith(f"settlement:{second.id}:")
        and d.key.split(":")[2] in deals_made
    ]


def test_a_failed_order_does_not_vouch() -> None:
    """One `rejected` event by the approved marketplace about the second key vouched for it (review:
    20 deals then lifted A 650 -> 836, as the attack fixed above did)."""
    world = World(others=1)
    (second,) = world.others
    world.vouch(second, "rejected")
    issuers = _reports_about_a(world, second, 20)
    assert issuers and set(issuers) == {POOL_ISSUER}, set(issuers)


def test_a_vouch_lapses_when_its_marketplace_is_retired() -> None:
    """A vouch outlived the marketplace's retirement, so the operator's remedy for a marketplace found
    corrupt left every key it had vouched for with standing (review)."""
    world = World(others=1)
    (second,) = world.others
    world.vouch(second, "delivered")
    assert set(_reports_about_a(world, second, 3)) == {second.id}  # vouched: standing
    world.retire()
    assert set(_reports_about_a(world, second, 3, first=3)) == {POOL_ISSUER}  # retired: pooled


def test_only_a_delivery_vouches() -> None:
    """An economic `confirmed` (which an integration may send when an order is placed) vouched, alone or
    beside a `rejected` of the same order (review: A 656 -> 839 both ways). A vouch is a delivery the
    approved marketplace reports: `delivered`, a settlement's delivery `pass`, a confirmed `done`."""
    for events in (["confirmed"], ["confirmed", "rejected"]):
        world = World(others=1)
        (second,) = world.others
        for event in events:  # one order
            world.vouch(second, event, ref="order-1")  # type: ignore[arg-type]
        issuers = _reports_about_a(world, second, 5)
        assert issuers and set(issuers) == {POOL_ISSUER}, (events, set(issuers))
