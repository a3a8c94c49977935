"""The reporter-standing policy (standing-v2): who has standing, and how the no-standing pool is bounded."""

from __future__ import annotations

import datetime as dt

from tests.unit.evidence.signed import DIGEST, new_id
from trustscore.evidence.project_log import ProjectionState
from trustscore.evidence.standing import (
    MIN_RATING,
    POOL_ISSUER,
    POOL_SHARE,
    REPORTER_MODEL,
    Standing,
)
from trustscore.kinds.approvals import MarketplaceApproval, make_approval
from trustscore.kinds.snapshots import RatingSnapshot, SnapshotRow
from trustscore.ledger import statements

T = dt.datetime(2026, 3, 1, 12, tzinfo=dt.UTC)


def snapshot(agent: str, rating: int | None, taken_at: str, model: str = REPORTER_MODEL) -> RatingSnapshot:
    return RatingSnapshot(
        nonce="n" * 32,
        issued_at=taken_at,
        signer=new_id(),
        model_version=model,
        weights_digest=DIGEST,
        log_size=1,
        taken_at=taken_at,
        ratings=[SnapshotRow(agent=agent, total=rating, adjusted=rating)],
    )


def approval(market: str, action: str) -> MarketplaceApproval:
    p = statements.parse_statement(make_approval(operator=new_id(), marketplace=market, action=action))  # type: ignore[arg-type]
    assert isinstance(p.predicate, MarketplaceApproval)
    return p.predicate


MARKET = new_id()


def vouched(s: Standing, agent: str, index: int) -> None:
    """A success about ``agent`` logged at ``index`` by MARKET, approved from the log's start."""
    if not s.approved(MARKET, index):
        s.add_approval(-1, approval(MARKET, "approve"))
    s.vouch(agent, index, MARKET)


def test_standing_needs_a_good_rating_held_for_thirty_days() -> None:
    s = Standing()
    a, b, c = new_id(), new_id(), new_id()
    for reporter in (a, b, c):
        vouched(s, reporter, 0)  # an approved marketplace reported a success about each (see the vouch test)
    s.add_snapshot(1, snapshot(a, 800, "2026-01-01T00:00:00Z"))
    s.add_snapshot(2, snapshot(b, MIN_RATING - 1, "2026-01-01T00:00:00Z"))
    s.add_snapshot(3, snapshot(c, None, "2026-01-01T00:00:00Z"))
    assert not s.has_standing(a, 2)  # rated, but not for 30 days yet
    s.add_snapshot(4, snapshot(a, 800, "2026-01-31T00:00:00Z"))
    s.add_snapshot(5, snapshot(b, 900, "2026-01-31T00:00:00Z"))  # good now, but >= 500 only since now
    s.add_snapshot(6, snapshot(c, 900, "2026-01-31T00:00:00Z"))  # first rated (non-null) only now
    assert s.has_standing(a, 5) and not s.has_standing(a, 4)  # only snapshots before the index count
    assert not s.has_standing(b, 6)  # a sleeper: rated 30 days, but >= 500 only now
    assert not s.has_standing(c, 7)
    s.add_snapshot(8, snapshot(a, 100, "2026-02-01T00:00:00Z"))
    assert not s.has_standing(a, 9)  # a fallen rating loses standing
    s.add_snapshot(10, snapshot(new_id(), 900, "2026-03-01T00:00:00Z", model="baseline-v0.3"))
    assert not s.has_standing(new_id(), 11)


def test_an_approved_marketplace_has_standing_until_retired() -> None:
    s, m = Standing(), new_id()
    assert not s.has_standing(m, 1)
    s.add_approval(3, approval(m, "approve"))
    assert not s.has_standing(m, 3) and s.has_standing(m, 4)
    s.add_approval(7, approval(m, "retire"))
    assert s.has_standing(m, 7) and not s.has_standing(m, 8)


def test_the_pool_is_a_share_of_the_standing_weight_and_never_newer() -> None:
    s, agent = Standing(), new_id()
    assert s.pool(agent, "delivery", "real", 0.5, T) is None  # nothing to stand beside
    for i in range(10):  # ten verified items: standing weight 10 x 0.9 = 9
        s.observe(agent, "delivery", f"k{i}", "verified", 1.0, T)
    later = T + dt.timedelta(days=3)
    used = 0.0
    for _ in range(1000):
        got = s.pool(agent, "delivery", "real", 0.5, later)
        if got is None:
            break
        extra, at = got
        assert at == T  # dated no later than the newest standing item
        used += extra
    assert abs(used - POOL_SHARE * 9.0) < 1e-9
    assert s.pool(agent, "economic", "real", 0.5, T) is None  # per dimension


def test_replaying_stored_evidence_rebuilds_the_same_state() -> None:
    """The server rebuilds the policy from projected evidence after a restart: it must continue exactly."""
    agent = new_id()
    first, replay = ProjectionState(b"\0" * 32), ProjectionState(b"\0" * 32)
    from trustscore.scoring.inputs import EvidenceItem

    stored: list[EvidenceItem] = []
    for i in range(5):
        at = T + dt.timedelta(days=i)
        first.standing.observe(agent, "delivery", f"k{i}", "real", 1.0, at)
        stored.append(
            EvidenceItem(agent=agent, dimension="delivery", source="real", at=at, value=1.0, key=f"k{i}")
        )
        got = first.standing.pool(agent, "delivery", "real-confidential", 0.5, at + dt.timedelta(hours=1))
        assert got is not None
        stored.append(
            EvidenceItem(
                agent=agent,
                dimension="delivery",
                source="real-confidential",
                at=got[1],
                value=1.0,
                issuer=POOL_ISSUER,
                extra_weight=got[0],
                key=f"p{i}",
            )
        )
    for index, item in enumerate(stored):
        replay.feed_evidence(item, index)
    for _ in range(3):
        assert first.standing.pool(agent, "delivery", "real", 1.0, T) == replay.standing.pool(
            agent, "delivery", "real", 1.0, T
        )


def test_a_sleeper_key_rated_low_long_ago_has_no_standing() -> None:
    """review-integrity: standing asked only that a key was first rated (any rating) 30 days ago. Keys
    staged in bulk with one trivial report each (rated 1..499) could be lifted over 500 on the day they
    were needed and report at full weight at once: the 30 days cost the attacker nothing. Standing now
    needs a rating >= 500 first reached at least 30 days before the current one (and >= 500 now)."""
    s = Standing()
    sleeper, honest = new_id(), new_id()
    vouched(s, sleeper, 0)
    vouched(s, honest, 0)
    s.add_snapshot(1, snapshot(sleeper, 12, "2026-01-01T00:00:00Z"))
    s.add_snapshot(2, snapshot(honest, 700, "2026-01-01T00:00:00Z"))
    s.add_snapshot(3, snapshot(sleeper, 12, "2026-02-01T00:00:00Z"))
    s.add_snapshot(4, snapshot(sleeper, 650, "2026-03-01T00:00:00Z"))  # lifted on the day
    s.add_snapshot(5, snapshot(honest, 640, "2026-03-01T00:00:00Z"))
    assert not s.has_standing(sleeper, 6)
    assert s.has_standing(honest, 6)
    s.add_snapshot(7, snapshot(sleeper, 650, "2026-03-31T00:00:00Z"))  # held 30 days: now it has
    assert s.has_standing(sleeper, 8)


def test_exams_alone_cannot_buy_standing() -> None:
    """review-integrity: the rule-based example solver (examples/agents/solver.py, no model at all) rates
    676 under trustscore-v2 from one sitting of every exam (measured against a real server). Keys rated
    that way for 30 days had standing and reported at full weight: N of them broke the Sybil bound. A
    rated reporter now also needs a report about it from a reporter with standing (a vouch)."""
    s = Standing()
    bot = new_id()
    s.add_snapshot(1, snapshot(bot, 676, "2026-01-01T00:00:00Z"))
    s.add_snapshot(2, snapshot(bot, 676, "2026-03-01T00:00:00Z"))
    assert not s.has_standing(bot, 3)
    vouched(s, bot, 5)  # an approved marketplace's event about it, logged at 5
    assert not s.has_standing(bot, 5) and s.has_standing(bot, 6)


def test_a_report_with_standing_vouches_for_its_subject() -> None:
    """Through the derivation: an approved marketplace's event vouches; an unapproved one's does not."""
    from tests.unit.evidence.signed import Log
    from trustscore.evidence import derive_log
    from trustscore.kinds.events import make_event

    log = Log()
    operator = log.service("operator", ["snapshot"])
    approved, other = log.party("approved", "marketplace"), log.party("other", "marketplace")
    agent = log.party("agent")
    log.submit(make_approval(operator=operator.id, marketplace=approved.id, action="approve"), operator)
    state = Standing()
    log.submit(make_event(marketplace=other.id, agent=agent.id, event="delivered", ref="o1",
                          occurred_at="2026-03-01T12:00:00Z"), other)  # fmt: skip
    derive_log(log.parsed(), state)
    assert state.vouched_at(agent.id) is None
    log.submit(make_event(marketplace=approved.id, agent=agent.id, event="delivered", ref="o2",
                          occurred_at="2026-03-01T12:00:00Z"), approved)  # fmt: skip
    state = Standing()
    derive_log(log.parsed(), state)
    assert state.vouched_at(agent.id) == len(log.entries) - 1
