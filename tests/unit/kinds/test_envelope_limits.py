"""The body limits of the single-statement routes hold their kind's largest legal statement: the widest
characters (four UTF-8 bytes; JSON escapes are at most six), every field and list at its bound, the
longest nonce and four signatures, each built and checked by the kind's own maker."""

from __future__ import annotations

import msgspec
import pytest

from trustscore.api.sitting_routes import DialogueIn
from trustscore.kinds.events import MAX_EVENT_BYTES, make_event
from trustscore.kinds.settlements import MAX_DETAILS, MAX_SETTLEMENT_BYTES, make_settlement
from trustscore.kinds.sittings import MAX_REQUEST_BYTES, make_request
from trustscore.kinds.subscriptions import MAX_AGENTS, MAX_SUBSCRIPTION_BYTES, MAX_URL, make_subscription
from trustscore.ledger import dsse, keys
from trustscore.ledger.statements import NONCE_MAX
from trustscore.services.sittings import MAX_DIALOGUE_BYTES, MAX_DIALOGUE_TURNS, MAX_MOVE_CHARS

KEYS = [keys.SigningKey.generate() for _ in range(dsse.MAX_SIGNATURES)]
WIDE = "\U0001d518"  # four bytes in UTF-8, one character
AT = "2026-12-07T00:00:00Z"
NONCE = "n" * NONCE_MAX


def envelope_bytes(payload: bytes) -> int:
    return len(msgspec.json.encode(dsse.sign(payload, KEYS)))


@pytest.mark.parametrize("ch", ["a", '"', "é", "€", WIDE])
def test_the_largest_settlement_fits(ch: str) -> None:
    details = {f"{i:02d}{ch * 98}": ch * 2000 for i in range(MAX_DETAILS)}
    payload = make_settlement(
        deal_id=ch * 200, seller=KEYS[0].id, buyer=KEYS[1].id, reporter_role="buyer", settled_at=AT,
        confirmed=True, details=details, nonce=NONCE,
    )  # fmt: skip
    assert envelope_bytes(payload) <= MAX_SETTLEMENT_BYTES * 0.75  # ~720 KB for the widest


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


def test_the_largest_dialogue_move_fits() -> None:
    moves = ["\x1f" * MAX_MOVE_CHARS] * MAX_DIALOGUE_TURNS  # a control character: six bytes escaped
    body = msgspec.json.encode(DialogueIn(token="t" * 64, item_id="i" * 200, outputs=moves))
    assert len(body) <= MAX_DIALOGUE_BYTES * 0.8
