"""Marketplace events: signed by the marketplace named in the predicate, about an agent."""

from __future__ import annotations

import hashlib

import pytest

from tests.unit.evidence.signed import T0, Log, new_id, predicate_update, refused
from trustscore.errors import InvalidInput, SignatureError
from trustscore.kinds.events import EVENT, make_event


def test_event_is_signed_by_the_marketplace_and_about_the_agent() -> None:
    log = Log()
    market, agent = log.party("Tavern", "marketplace"), log.party("agent")
    payload = make_event(
        marketplace=market.id, agent=agent.id, event="delivered", ref="order-7", occurred_at=T0
    )
    entry = log.entries[log.submit(payload, market)]
    assert entry.kind == EVENT.predicate_type
    assert (entry.signer, entry.subject) == (market.id, agent.id)
    [subject] = entry.statement.statement.subject
    assert subject.digest == {"sha256": hashlib.sha256(b"order-7").hexdigest()}
    with pytest.raises(SignatureError, match=f"must be signed by {market.id}"):
        log.submit(payload, agent)


def test_a_marketplace_cannot_report_about_itself() -> None:
    me = new_id()
    with pytest.raises(InvalidInput, match="self-reporting"):
        make_event(marketplace=me, agent=me, event="confirmed", ref="r", occurred_at=T0)


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"marketplace": "tavern"}, "marketplace"),
        ({"agent": "ts1_xyz"}, "agent"),
        ({"event": "paid"}, "event"),
        ({"ref": ""}, "ref"),
        ({"ref": "a\nb"}, "ref"),
        ({"occurred_at": "2026-03-01T12:00:00+01:00"}, "occurred_at"),
        ({"weight": 2}, "weight"),
    ],
)
def test_event_fields_are_checked(fields: dict[str, object], words: str) -> None:
    payload = make_event(
        marketplace=new_id(), agent=new_id(), event="rejected", ref="order-7", occurred_at=T0
    )
    refused(payload, predicate_update(**fields), InvalidInput, words)


def test_event_subject_must_match() -> None:
    payload = make_event(marketplace=new_id(), agent=new_id(), event="rejected", ref="o", occurred_at=T0)
    refused(payload, lambda s: s["subject"][0].update(name=new_id()), InvalidInput, "subject")
    refused(payload, predicate_update(ref="other"), InvalidInput, "subject")
