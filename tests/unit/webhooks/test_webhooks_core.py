"""The pure core of webhooks: subscription statements, event derivation and matching, Standard Webhooks
signatures, the retry schedule and Atom feeds."""

from __future__ import annotations

import base64
import datetime as dt
import hashlib
import hmac
import random

import feedparser  # type: ignore[import-untyped]
import pytest
import standardwebhooks

from trustscore.errors import InvalidInput, SignatureError
from trustscore.kinds.cards import AgentCard
from trustscore.kinds.events import Event
from trustscore.kinds.settlements import Settlement
from trustscore.kinds.snapshots import RatingSnapshot, SnapshotRow
from trustscore.kinds.subscriptions import Subscription, make_revocation, make_subscription
from trustscore.ledger import keys, statements
from trustscore.webhooks import events, feeds, schedule, signing

A = "ts1_" + "a" * 40
B = "ts1_" + "b" * 40
T = "2026-11-29T00:00:00Z"


def sub(**kw: object) -> Subscription:
    base: dict[str, object] = {
        "nonce": "n" * 16,
        "issued_at": T,
        "subscriber": B,
        "url": "https://x.example/h",
        "events": ["rating.changed"],
    }
    return Subscription(**{**base, **kw})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "url",
    [
        "ftp://x.example/",
        "https://user:pw@x.example/",
        "https://x.example/#frag",
        "https:///nohost",
        "https://x.example/" + "a" * 3000,
        "https://x.example/a b",
        "https://x.example:0/",
        "https://x.example:99999/",
    ],
)
def test_subscription_urls_out_of_shape_are_refused(url: str) -> None:
    with pytest.raises(InvalidInput):
        make_subscription(subscriber=B, url=url, events=["event.negative"])


def test_subscription_counts_and_threshold_are_bounded() -> None:
    with pytest.raises(InvalidInput):
        make_subscription(subscriber=B, url="https://x.example/", events=[])
    with pytest.raises(InvalidInput):
        make_subscription(subscriber=B, url="https://x.example/", events=["event.negative", "event.negative"])
    with pytest.raises(InvalidInput):
        make_subscription(subscriber=B, url="https://x.example/", events=["event.negative"], threshold=1001)
    many = [f"ts1_{i:040x}" for i in range(1001)]
    with pytest.raises(InvalidInput):
        make_subscription(subscriber=B, url="https://x.example/", events=["event.negative"], agents=many)
    with pytest.raises(InvalidInput):
        make_subscription(subscriber=B, url="https://x.example/", events=["nope"])  # type: ignore[list-item]
    ok = statements.parse_statement(
        make_subscription(subscriber=B, url="https://x.example/", events=["grade.changed"])
    )
    assert ok.facts.signer == B
    assert statements.parse_statement(make_revocation(subscriber=B, subscription=7)).facts.signer == B


def card(**kw: object) -> AgentCard:
    base: dict[str, object] = {
        "nonce": "n" * 16,
        "issued_at": T,
        "public_key": "k",
        "name": "a",
        "endpoint": "https://a.example/",
    }
    return AgentCard(**{**base, **kw})  # type: ignore[arg-type]


def test_a_card_change_reports_what_changed_and_a_first_card_nothing() -> None:
    assert events.card_changed(5, card(), None, A) == []
    assert events.card_changed(5, card(name="renamed"), card(), A) == []  # the name is not watched
    [e] = events.card_changed(5, card(endpoint="https://b.example/", capabilities=["x"]), card(), A)
    assert e.type == "card.changed" and e.agent == A
    assert e.data["changes"] == {
        "endpoint": {"old": "https://a.example/", "new": "https://b.example/"},
        "capabilities": {"old": [], "new": ["x"]},
    }


def test_negative_settlements_and_events_name_the_party_at_fault() -> None:
    s = Settlement(
        nonce="n" * 16,
        issued_at=T,
        deal_id="d",
        seller=A,
        buyer=B,
        reporter_role="buyer",
        delivery="late",
        settled_at=T,
    )
    [e] = events.negative_settlement(3, s)
    assert (e.type, e.agent, e.data["delivery"]) == ("settlement.negative", A, "late")
    ok = Settlement(
        nonce="n" * 16,
        issued_at=T,
        deal_id="d",
        seller=A,
        buyer=B,
        reporter_role="buyer",
        delivery="pass",
        settled_at=T,
    )
    assert events.negative_settlement(3, ok) == []
    good = Event(
        nonce="n" * 16, issued_at=T, marketplace=B, agent=A, event="delivered", ref="r", occurred_at=T
    )
    assert events.negative_event(4, good) == []
    bad = Event(nonce="n" * 16, issued_at=T, marketplace=B, agent=A, event="rejected", ref="r", occurred_at=T)
    assert [x.type for x in events.negative_event(4, bad)] == ["event.negative"]


def grade_of(model: str, total: int) -> str | None:
    return "A" if total >= 800 else "B" if total >= 500 else "C"


def snapshot(rows: list[SnapshotRow]) -> RatingSnapshot:
    return RatingSnapshot(
        nonce="n" * 16,
        issued_at=T,
        signer=B,
        model_version="m",
        weights_digest="0" * 64,
        log_size=9,
        taken_at=T,
        ratings=rows,
    )


def test_rating_and_grade_changes_come_from_consecutive_snapshots_and_respect_the_threshold() -> None:
    snap = snapshot(
        [SnapshotRow(agent=A, total=790, adjusted=790), SnapshotRow(agent=B, total=600, adjusted=600)]
    )
    found = events.rating_changes(10, snap, {A: 810, B: 600}, grade_of)
    assert [(e.type, e.agent) for e in found] == [("rating.changed", A), ("grade.changed", A)]
    change = found[0]
    assert change.delta == -20 and found[1].data["old_grade"] == "A" and found[1].data["new_grade"] == "B"
    assert events.wants(sub(threshold=20), change) and not events.wants(sub(threshold=21), change)
    assert not events.wants(sub(agents=[B]), change)
    assert not events.wants(sub(events=["grade.changed"]), change)
    first = events.rating_changes(10, snap, {}, grade_of)  # never snapshotted: a first rating always counts
    assert first[0].delta is None and events.wants(sub(threshold=1000), first[0])


def test_event_ids_are_stable_and_name_their_cause() -> None:
    snap = snapshot([SnapshotRow(agent=A, total=700, adjusted=700)])
    one = events.rating_changes(10, snap, {A: 100}, grade_of)
    assert one == events.rating_changes(10, snap, {A: 100}, grade_of)
    assert one[0].id != events.rating_changes(11, snap, {A: 100}, grade_of)[0].id
    assert one[0].id != one[1].id  # rating.changed and grade.changed of one cause differ
    assert one[0].body == events.rating_changes(10, snap, {A: 100}, grade_of)[0].body


def test_a_signed_delivery_verifies_and_any_change_breaks_it() -> None:
    key = keys.SigningKey.generate()
    body, now = b'{"type":"event.negative"}', 1_800_000_000
    hdrs = signing.headers(key, "evt_1", now, body)
    assert hdrs["webhook-signature"].startswith("v1a,")
    pub = signing.parse_public_key(signing.public_key_text(key.public_key))
    assert signing.verify(pub, hdrs, body, now) == "evt_1"
    for tampered_body, tampered in [
        (body + b" ", hdrs),
        (body, {**hdrs, "webhook-id": "evt_2"}),
        (body, {**hdrs, "webhook-timestamp": str(now + 1)}),
        (body, {**hdrs, "webhook-signature": "v1," + hdrs["webhook-signature"][4:]}),
        (body, {k: v for k, v in hdrs.items() if k != "webhook-id"}),
    ]:
        with pytest.raises(SignatureError):
            signing.verify(pub, tampered, tampered_body, now)
    with pytest.raises(SignatureError):  # replayed later than the tolerance
        signing.verify(pub, hdrs, body, now + signing.TOLERANCE_S + 1)
    other = keys.SigningKey.generate()
    with pytest.raises(SignatureError):
        signing.verify(other.public_key, hdrs, body, now)


def test_the_signed_content_is_the_one_the_standard_webhooks_library_signs() -> None:
    # The library (1.1.0) implements only symmetric v1; its sign() shows the content it signs, which
    # must be byte for byte the content v1a signs with Ed25519 (docs/webhooks.md).
    secret = b"k" * 32
    ts = dt.datetime.fromtimestamp(1_800_000_000, tz=dt.UTC)
    lib = standardwebhooks.Webhook(base64.b64encode(secret).decode()).sign("evt_1", ts, '{"a":1}')
    ours = hmac.new(
        secret, signing.signed_content("evt_1", 1_800_000_000, b'{"a":1}'), hashlib.sha256
    ).digest()
    assert lib == "v1," + base64.b64encode(ours).decode()


def test_backoff_grows_exponentially_with_jitter_up_to_the_cap() -> None:
    rng = random.Random(1)
    for attempt in range(1, 20):
        d = min(schedule.CAP_S, schedule.BASE_S * 2 ** (attempt - 1))
        waits = [schedule.backoff(attempt, rng=rng) for _ in range(50)]
        assert all(d / 2 <= w <= d for w in waits)
        assert len(set(waits)) > 1  # jittered


def test_feeds_parse_and_escape() -> None:
    e = feeds.FeedEntry(
        "evt_1", "card.changed", A, dt.datetime(2026, 11, 29, tzinfo=dt.UTC), b'{"name":"<script>&"}'
    )
    doc = feedparser.parse(feeds.atom("urn:x", "t <&>", "https://s.example/feed.atom", [e]))
    assert not doc.bozo and doc.version == "atom10"
    assert doc.feed.title == "t <&>"
    assert doc.entries[0].id == "urn:trustscore:event:evt_1"
    assert doc.entries[0].content[0].value == '{"name":"<script>&"}'
    empty = feedparser.parse(feeds.atom("urn:x", "t", "https://s.example/feed.atom", []))
    assert not empty.bozo and empty.entries == []


def test_a_delivery_names_its_subscription_and_a_receiver_may_insist_on_its_own() -> None:
    """One key signs every delivery: without the subscription in the signed id, a subscriber could
    forward a genuine delivery to another subscriber's URL and it verified there (audit, 2026-12-07)."""
    key = keys.SigningKey.generate()
    body, now = b'{"type":"event.negative"}', 1_800_000_000
    hdrs = signing.headers(key, signing.message_id("evt_1", 15), now, body)
    assert hdrs["webhook-id"] == "evt_1_s15"
    assert signing.verify(key.public_key, hdrs, body, now, subscription=15) == "evt_1_s15"
    assert signing.verify(key.public_key, hdrs, body, now, subscription={3, 15}) == "evt_1_s15"
    assert signing.verify(key.public_key, hdrs, body, now) == "evt_1_s15"  # a receiver that does not check
    for other in (5, 1, 150, 115, {1, 5}, ()):
        with pytest.raises(SignatureError, match="another subscription"):
            signing.verify(key.public_key, hdrs, body, now, subscription=other)
