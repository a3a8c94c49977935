"""Party cards and service cards: self-signed key registrations, checked like agent cards."""

from __future__ import annotations

import pytest

from tests.unit.evidence.signed import checked, predicate_update, refused
from trustscore import canonical
from trustscore.errors import InvalidInput, SignatureError
from trustscore.kinds.parties import PARTY_CARD, make_party_card
from trustscore.kinds.service_card import SERVICE_CARD, make_service_card
from trustscore.ledger import keys


def test_party_card_is_self_signed_and_registers_its_key() -> None:
    key = keys.SigningKey.generate()
    entry = checked(make_party_card(key.public_key, "Tavern", "marketplace"), key)
    assert entry.kind == PARTY_CARD.predicate_type
    assert entry.signer == entry.subject == key.id
    assert entry.introduces_key == key.public_key


def test_party_card_controller_must_cosign() -> None:
    key, boss = keys.SigningKey.generate(), keys.SigningKey.generate()
    payload = make_party_card(key.public_key, "shop", "counterparty", controller_key=boss.public_key)
    entry = checked(payload, key, boss)
    assert entry.statement.facts.cosigners == ((boss.id, boss.public_key),)
    with pytest.raises(SignatureError, match=f"must be signed by {boss.id}"):
        checked(payload, key)


def test_party_card_signed_by_another_key_is_refused() -> None:
    key, other = keys.SigningKey.generate(), keys.SigningKey.generate()
    payload = make_party_card(key.public_key, "shop", "counterparty")
    with pytest.raises(SignatureError, match=f"must be signed by {key.id}"):
        checked(payload, other, known={other.id: other.public_key})


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"public_key": "not base64!"}, "public_key"),
        ({"public_key": canonical.b64encode(b"x" * 31)}, "public_key"),
        ({"name": ""}, "name"),
        ({"name": "x" * 201}, "name"),
        ({"role": "agent"}, "role"),
        ({"controller_key": "%%%"}, "controller_key"),
        ({"extra": 1}, "extra"),
    ],
)
def test_party_card_fields_are_checked(fields: dict[str, object], words: str) -> None:
    key = keys.SigningKey.generate()
    refused(
        make_party_card(key.public_key, "shop", "counterparty"),
        predicate_update(**fields),
        InvalidInput,
        words,
    )


def test_party_card_refuses_its_own_key_as_controller_and_a_foreign_subject() -> None:
    key = keys.SigningKey.generate()
    payload = make_party_card(key.public_key, "shop", "counterparty")
    own = canonical.b64encode(key.public_key)
    refused(payload, predicate_update(controller_key=own), InvalidInput, "controller_key must differ")
    other = keys.SigningKey.generate().id
    refused(payload, lambda s: s["subject"][0].update(name=other), InvalidInput, "subject")


def test_service_card_is_self_signed() -> None:
    key = keys.SigningKey.generate()
    entry = checked(make_service_card(key.public_key, "trustscore grader", ["grader", "reverify"]), key)
    assert entry.kind == SERVICE_CARD.predicate_type
    assert entry.signer == entry.subject == key.id
    assert entry.introduces_key == key.public_key
    other = keys.SigningKey.generate()
    with pytest.raises(SignatureError, match="must be signed by"):
        checked(make_service_card(key.public_key, "g", ["grader"]), other, known={other.id: other.public_key})


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"roles": []}, "roles"),
        ({"roles": ["grader", "grader"]}, "roles"),
        ({"roles": ["admin"]}, "roles"),
        ({"public_key": canonical.b64encode(b"x" * 33)}, "public_key"),
        ({"name": "\x00"}, "name"),
        ({"controller_key": None}, "controller_key"),
    ],
)
def test_service_card_fields_are_checked(fields: dict[str, object], words: str) -> None:
    key = keys.SigningKey.generate()
    refused(
        make_service_card(key.public_key, "svc", ["snapshot"]),
        predicate_update(**fields),
        InvalidInput,
        words,
    )
