"""Signed statements the webhook tests post: cards, subscriptions and negative marketplace events."""

from __future__ import annotations

import itertools
from typing import Any

import msgspec

from tests.helpers import new_card
from trustscore.kinds.events import make_event
from trustscore.kinds.parties import make_party_card
from trustscore.kinds.subscriptions import EventType, make_revocation, make_subscription
from trustscore.ledger import dsse, keys

_refs = itertools.count()


def body(env: Any) -> bytes:
    return msgspec.json.encode(env)


def market_card() -> tuple[keys.SigningKey, bytes]:
    market = keys.SigningKey.generate()
    return market, body(dsse.sign(make_party_card(market.public_key, "market", "marketplace"), [market]))


def agent_card(name: str = "agent") -> tuple[keys.SigningKey, bytes]:
    key, env = new_card(name)
    return key, body(env)


def subscription(
    key: keys.SigningKey,
    url: str,
    events: list[EventType],
    agents: list[str] | None = None,
    threshold: int = 0,
) -> bytes:
    payload = make_subscription(subscriber=key.id, url=url, events=events, agents=agents, threshold=threshold)
    return body(dsse.sign(payload, [key]))


def revocation(key: keys.SigningKey, index: int) -> bytes:
    return body(dsse.sign(make_revocation(subscriber=key.id, subscription=index), [key]))


def negative_event(market: keys.SigningKey, agent: str) -> bytes:
    payload = make_event(
        marketplace=market.id,
        agent=agent,
        event="delivery_failed",
        ref=f"order-{next(_refs)}",
        occurred_at="2026-11-29T00:00:00Z",
    )
    return body(dsse.sign(payload, [market]))
