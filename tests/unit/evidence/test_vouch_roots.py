"""Only an operator-approved marketplace vouches (policy standing-v2).

Under standing-v1 any reporter with standing vouched for the agents it reported about, so an agent that
had earned standing could hand it on to a second agent key of its own (another controller, or none, so
nothing ties them) which had sat exams beside it for 30 days: one settlement by A about B made B a
reporter with standing, and B's settlements about A then counted in full, with no bound on their number
(found by an adversarial review, 2026-12-07: 20 deals lifted A's trustscore-v2 total 650 -> 836, 1,000
deals -> 898). A rated reporter now needs a report about it by an approved marketplace, which the
operator answers for; reporters with standing no longer make more of themselves.
"""

from __future__ import annotations

from tests.unit.evidence.test_self_attested_standing import MODELS, World, _at
from trustscore.evidence.standing import POOL_ISSUER
from trustscore.kinds.settlements import make_settlement
from trustscore.ledger import statements


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
    for i in range(100):  # B reports about A: each deal a new item
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
    after = world.rate(at)
    reports = [d for d in world.evidence if d.key is not None and d.key.startswith(f"settlement:{second.id}")]
    assert reports and all(d.issuer == POOL_ISSUER for d in reports), {d.issuer for d in reports}
    for model in MODELS:
        old, new = before[model].total, after[model].total
        assert old is not None and new is not None
        assert new - old <= 23, (model, old, new)  # the Sybil bound (standing-v1: +186 at 20 deals)
