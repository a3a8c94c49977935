"""The body limits of the single-statement routes hold their kind's largest legal statement: every field
and list at its bound, the longest nonce, four signatures, and the widest encoding of each character a
client may send (a statement is any JSON, so Python's default ``json.dumps`` escaping every non-ASCII
character is legal: a character beyond the BMP is a surrogate pair of ``\\uXXXX`` escapes, 12 bytes;
found by review), each checked by the kind's own parser."""

from __future__ import annotations

import json

import msgspec
import pytest

from trustscore.api.sitting_routes import DialogueIn
from trustscore.kinds.events import MAX_EVENT_BYTES, make_event
from trustscore.kinds.settlements import MAX_DETAILS, MAX_SETTLEMENT_BYTES, make_settlement
from trustscore.kinds.sittings import MAX_REQUEST_BYTES, make_request
from trustscore.kinds.subscriptions import MAX_AGENTS, MAX_SUBSCRIPTION_BYTES, MAX_URL, make_subscription
from trustscore.ledger import dsse, keys, statements
from trustscore.ledger.statements import NONCE_MAX
from trustscore.services.sittings import MAX_DIALOGUE_BYTES, MAX_DIALOGUE_TURNS, MAX_MOVE_CHARS

KEYS = [keys.SigningKey.generate() for _ in range(dsse.MAX_SIGNATURES)]
WIDE = "\U0001d518"  # four bytes in UTF-8, one character
AT = "2026-12-07T00:00:00Z"
NONCE = "n" * NONCE_MAX


def envelope_bytes(payload: bytes) -> int:
    """The envelope of ``payload`` as its widest legal encoding (every non-ASCII character escaped)."""
    escaped = json.dumps(json.loads(payload)).encode()  # ensure_ascii: Python's default
    statements.parse_statement(escaped)  # still legal
    return len(msgspec.json.encode(dsse.sign(escaped, KEYS)))


@pytest.mark.parametrize("ch", ["a", '"', "é", "€", WIDE])
def test_the_largest_settlement_fits(ch: str) -> None:
    details = {f"{i:02d}{ch * 98}": ch * 2000 for i in range(MAX_DETAILS)}
    payload = make_settlement(
        deal_id=ch * 200, seller=KEYS[0].id, buyer=KEYS[1].id, reporter_role="buyer", settled_at=AT,
        confirmed=True, details=details, nonce=NONCE,
    )  # fmt: skip
    assert envelope_bytes(payload) <= MAX_SETTLEMENT_BYTES * 0.75  # ~2.16 MB for the widest


def test_the_largest_event_fits() -> None:
    payload = make_event(
        marketplace=KEYS[0].id, agent=KEYS[1].id, event="negotiation_expired", ref=WIDE * 200,
        occurred_at=AT, nonce=NONCE,
    )  # fmt: skip
    assert envelope_bytes(payload) <= MAX_EVENT_BYTES / 10


def test_the_largest_subscription_fits() -> None:
    agents = [keys.SigningKey.generate().id for _ in range(MAX_AGENTS)]
    url = "https://example.com/" + WIDE * (MAX_URL - len("https://example.com/"))
    payload = make_subscription(
        subscriber=KEYS[0].id, url=url, events=["rating.changed", "grade.changed"], agents=agents, nonce=NONCE
    )
    assert envelope_bytes(payload) <= MAX_SUBSCRIPTION_BYTES / 2


def test_the_largest_sitting_request_fits() -> None:
    payload = make_request(KEYS[0].id, "a" + "b" * 63 + "@999999")
    assert envelope_bytes(payload) <= MAX_REQUEST_BYTES / 10


@pytest.mark.parametrize("ch", ["\x1f", WIDE])
def test_the_largest_dialogue_move_fits(ch: str) -> None:
    moves = [ch * MAX_MOVE_CHARS] * MAX_DIALOGUE_TURNS
    body = json.dumps({"token": "t" * 64, "item_id": "i" * 200, "outputs": moves}).encode()
    msgspec.json.decode(body, type=DialogueIn)
    assert len(body) <= MAX_DIALOGUE_BYTES * 0.8  # ~1.57 MB for the widest
