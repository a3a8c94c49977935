"""Settlements: signed by the reporting party, about the other one; self-dealing and leaks refused."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from tests.unit.evidence.signed import DIGEST, T0, Log, new_id, predicate_update, refused
from trustscore import canonical
from trustscore.errors import InvalidInput, SignatureError, UnknownSigner
from trustscore.kinds.settlements import (
    SETTLEMENT,
    details_commitment,
    make_settlement,
    same_controller,
)
from trustscore.ledger import dsse, keys


@pytest.fixture
def log() -> Log:
    return Log()


def _deal(seller: str, buyer: str, **kw: Any) -> bytes:
    fields: dict[str, Any] = {"deal_id": "deal-1", "reporter_role": "buyer", "delivery": "pass"}
    fields.update(kw)
    return make_settlement(seller=seller, buyer=buyer, settled_at=T0, **fields)


def test_buyer_reports_the_seller(log: Log) -> None:
    seller, buyer = log.party("seller"), log.party("buyer")
    index = log.submit(_deal(seller.id, buyer.id, confirmed=True), buyer)
    entry = log.entries[index]
    assert entry.kind == SETTLEMENT.predicate_type
    assert (entry.signer, entry.subject) == (buyer.id, seller.id)
    [subject] = entry.statement.statement.subject
    assert subject.name == seller.id
    assert subject.digest == {"sha256": hashlib.sha256(b"deal-1").hexdigest()}


def test_seller_reports_the_buyer(log: Log) -> None:
    seller, buyer = log.party("seller"), log.party("buyer")
    payload = _deal(seller.id, buyer.id, reporter_role="seller", delivery=None, payment="fail")
    entry = log.entries[log.submit(payload, seller)]
    assert (entry.signer, entry.subject) == (seller.id, buyer.id)


def test_only_the_named_reporter_may_sign(log: Log) -> None:
    seller, buyer = log.party("seller"), log.party("buyer")
    with pytest.raises(SignatureError, match=f"must be signed by {buyer.id}"):
        log.submit(_deal(seller.id, buyer.id), seller)
    stranger = keys.SigningKey.generate()
    with pytest.raises(UnknownSigner):
        log.append(dsse.sign(_deal(seller.id, buyer.id), [stranger]))


def test_self_dealing_is_refused() -> None:
    me = new_id()
    with pytest.raises(InvalidInput, match="self-dealing"):
        _deal(me, me)


def test_confidential_needs_a_commitment_and_no_details() -> None:
    seller, buyer = new_id(), new_id()
    with pytest.raises(InvalidInput, match="details_commitment is required"):
        _deal(seller, buyer, confidential=True)
    details = {"price": "12 USD", "salt": "5f2b"}
    with pytest.raises(InvalidInput, match="details must be absent"):
        _deal(
            seller, buyer, confidential=True, details=details, details_commitment=details_commitment(details)
        )
    _deal(seller, buyer, confidential=True, details_commitment=details_commitment(details))
    _deal(seller, buyer, details=details)  # public details are fine


def test_something_must_be_reported() -> None:
    with pytest.raises(InvalidInput, match="delivery, payment or confirmed"):
        _deal(new_id(), new_id(), delivery=None)
    _deal(new_id(), new_id(), delivery=None, confirmed=True)


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"deal_id": ""}, "deal_id"),
        ({"deal_id": "x" * 201}, "deal_id"),
        ({"seller": "alice"}, "seller"),
        ({"seller": "ts1_" + "A" * 40}, "seller"),
        ({"buyer": "ts1_" + "0" * 39}, "buyer"),
        ({"reporter_role": "broker"}, "reporter_role"),
        ({"delivery": "early"}, "delivery"),
        ({"payment": "pass"}, "payment is reported by the seller"),
        ({"payment": "late", "reporter_role": "seller", "delivery": None}, "payment"),
        ({"confirmed": 1}, "confirmed"),
        ({"confidential": "no"}, "confidential"),
        ({"details_commitment": "AB" * 32}, "details_commitment"),
        ({"details_commitment": "ab" * 31}, "details_commitment"),
        ({"details": {"k": ""}}, "details"),
        ({"details": {str(i): "v" for i in range(65)}}, "details"),
        ({"details": {"k": 1}}, "details"),
        ({"settled_at": "2026-03-01 12:00"}, "settled_at"),
        ({"bonus": True}, "bonus"),
    ],
)
def test_settlement_fields_are_checked(fields: dict[str, object], words: str) -> None:
    refused(_deal(new_id(), new_id()), predicate_update(**fields), InvalidInput, words)


def test_delivery_is_the_buyers_to_report() -> None:
    payload = _deal(new_id(), new_id(), reporter_role="seller", delivery=None, payment="pass")
    refused(payload, predicate_update(delivery="pass"), InvalidInput, "delivery is reported by the buyer")


def test_subject_must_be_the_other_party_and_the_deal() -> None:
    seller, buyer = new_id(), new_id()
    payload = _deal(seller, buyer)
    refused(payload, lambda s: s["subject"][0].update(name=buyer), InvalidInput, "subject")
    refused(payload, lambda s: s["subject"][0].update(digest={"sha256": DIGEST}), InvalidInput, "subject")
    refused(payload, predicate_update(deal_id="deal-2"), InvalidInput, "subject")


def test_same_controller() -> None:
    seller, buyer, boss = keys.SigningKey.generate(), keys.SigningKey.generate(), keys.SigningKey.generate()
    boss_b64 = canonical.b64encode(boss.public_key)
    assert not same_controller(None, None, seller.id, buyer.id)
    assert same_controller(None, None, seller.id, seller.id)
    assert same_controller(boss_b64, boss_b64, seller.id, buyer.id)
    assert same_controller(boss_b64, boss.id, seller.id, buyer.id)  # a key or its id
    assert not same_controller(boss_b64, None, seller.id, buyer.id)
    assert not same_controller(None, boss_b64, seller.id, buyer.id)
    assert same_controller(canonical.b64encode(buyer.public_key), None, seller.id, buyer.id)
    assert same_controller(None, seller.id, seller.id, buyer.id)
    other = canonical.b64encode(keys.SigningKey.generate().public_key)
    assert not same_controller(boss_b64, other, seller.id, buyer.id)
