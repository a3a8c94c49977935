"""A signed statement whose JSON repeats a key in one object is refused at intake. The server's parser
keeps the last value and a verifier's may keep the first (RFC 8259 leaves it open), so such an entry
would say one thing to the bureau and another to whoever recomputes a rating from the log: found by the
session-16 fuzzer, which had a card logged with two names."""

from __future__ import annotations

import json
from typing import Any

import msgspec
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from tests.helpers import new_card
from tests.integration.api.test_fuzzed_inputs import refused, size
from trustscore.canonical import b64encode
from trustscore.errors import InvalidInput
from trustscore.kinds import cards
from trustscore.kinds.settlements import make_settlement
from trustscore.ledger import dsse, keys, statements

Client = AsyncTestClient[Litestar]


def card_payload(key: keys.SigningKey) -> bytes:
    card = cards.AgentCard(
        nonce="cd" * 16,
        issued_at=statements.format_time(statements.EARLIEST_CLAIMED),
        public_key=b64encode(key.public_key),
        name="honest",
        capabilities=[],
    )
    return statements.make_statement(cards.AGENT_CARD, cards.card_subject(key.public_key), card)


def signed(payload: bytes, key: keys.SigningKey) -> bytes:
    return msgspec.json.encode(dsse.sign(payload, [key]))


# Each turns the canonical card payload into one that repeats a key; the server's parser reads the last
# value, a first-wins parser the first.
REPEATS = {
    "a field of the predicate": (b'"name":"honest"', b'"name":"honest","name":"other"'),
    "a field spelt with an escape": (b'"name":"honest"', b'"name":"honest","n\\u0061me":"other"'),
    "the predicate type": (
        b'"predicateType":',
        b'"predicateType":"https://example.invalid/other/v1","predicateType":',
    ),
    "a digest of the subject": (b'"digest":{', b'"digest":{"sha256":"00","sha256":"00",'),
    "with spaces, not compact": (b'"name":"honest"', b'"name" : "honest" ,\n "name" : "other"'),
}


@pytest.mark.parametrize("case", sorted(REPEATS))
async def test_a_statement_repeating_a_key_is_refused_and_nothing_is_logged(
    client: Client, case: str
) -> None:
    key = keys.SigningKey.generate()
    old, new = REPEATS[case]
    payload = card_payload(key)
    assert payload.count(old) == 1
    forged = payload.replace(old, new)
    with pytest.raises(ValueError):  # what a strict parser says of it
        json.loads(forged, object_pairs_hook=_strict)
    before = await size(client)
    assert "repeats the key" in refused(await client.post("/v1/log/entries", content=signed(forged, key)))
    assert await size(client) == before


async def test_a_statement_not_in_compact_form_without_repeats_is_still_admitted(client: Client) -> None:
    """The compact check is only the fast path: a client's own layout is read key by key."""
    key = keys.SigningKey.generate()
    spaced = json.dumps(json.loads(card_payload(key)), indent=2, ensure_ascii=True).encode()
    r = await client.post("/v1/log/entries", content=signed(spaced, key))
    assert r.status_code == 201, r.text


async def test_a_non_compact_payload_with_non_ascii_text_and_escapes_is_admitted(client: Client) -> None:
    key = keys.SigningKey.generate()
    card = json.loads(card_payload(key))
    card["predicate"]["name"] = 'Zoë ✓ "quoted" / a:b'
    for ascii_only in (False, True):  # raw UTF-8, then \u escapes
        card["predicate"]["nonce"] = ("ef" if ascii_only else "fe") * 16
        text = json.dumps(card, indent=1, ensure_ascii=ascii_only).encode()
        r = await client.post("/v1/log/entries", content=signed(text, key))
        assert r.status_code == 201, r.text


async def test_a_settlement_repeating_a_key_of_its_free_form_details_is_refused(client: Client) -> None:
    """``details`` is the one free-form object a statement may carry (up to 64 keys)."""
    seller, seller_card = new_card("seller")
    buyer, buyer_card = new_card("buyer")
    for card in (seller_card, buyer_card):
        assert (await client.post("/v1/log/entries", content=msgspec.json.encode(card))).status_code == 201
    payload = make_settlement(
        deal_id="d-1",
        seller=seller.id,
        buyer=buyer.id,
        reporter_role="buyer",
        delivery="pass",
        settled_at=statements.format_time(statements.EARLIEST_CLAIMED),
        details={"price": "10"},
    )
    forged = payload.replace(b'"price":"10"', b'"price":"10","price":"9999"')
    before = await size(client)
    r = await client.post("/v1/settlements", content=signed(forged, buyer))
    assert "repeats the key 'price'" in refused(r)
    assert await size(client) == before


def test_finding_the_repeated_key_is_linear() -> None:
    """(Review.) Naming the key compared each with all before it: 20,000 keys took 3.7 s."""
    many = b"{" + b",".join(b'"k%d":1' % i for i in range(200_000)) + b',"k0":2}'
    with pytest.raises(InvalidInput, match="'k0'"):
        statements.check_unique_keys(many)


def test_deep_nesting_is_refused_not_a_crash() -> None:
    deep = b'{"a":' * 5000 + b"1" + b"}" * 5000
    with pytest.raises(InvalidInput):
        statements.check_unique_keys(deep)


def _strict(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    names = [k for k, _ in pairs]
    if len(set(names)) != len(names):
        raise ValueError("repeated key")
    return dict(pairs)
