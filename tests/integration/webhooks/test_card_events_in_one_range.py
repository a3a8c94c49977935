"""``card.changed`` compares each card with the agent's card just before it, also when the projector
derives many cards in one range (the previous cards are looked up once for the range, then followed; a
first card is read only when a later card of its agent in the range needs it)."""

from __future__ import annotations

import json

from tests.integration.store.test_group_commit import checked
from trustscore import canonical
from trustscore.kinds.cards import AGENT_CARD, AgentCard, card_subject
from trustscore.ledger import dsse, keys, statements
from trustscore.ledger.submission import CheckedEntry
from trustscore.store import db
from trustscore.store.log import LogStore
from trustscore.store.webhooks import derive


def card(key: keys.SigningKey, model: str, nonce: str) -> CheckedEntry:
    predicate = AgentCard(
        nonce=nonce * 32,
        issued_at="2026-12-01T00:00:00Z",
        public_key=canonical.b64encode(key.public_key),
        name="agent",
        model=model,
    )
    payload = statements.make_statement(AGENT_CARD, card_subject(key.public_key), predicate)
    return checked(dsse.sign(payload, [key]))


async def test_each_card_is_compared_with_the_one_before_it(dsn: str) -> None:
    await db.migrate(dsn)
    pool = await db.create_pool(dsn, min_size=1, max_size=2)
    try:
        store = LogStore(pool)
        a, b, c = (keys.SigningKey.generate() for _ in range(3))
        start = await store.sequenced_size()
        await store.append([card(a, "m1", "1")])  # before the range
        middle = start + 1
        await store.append(
            [
                card(a, "m2", "2"),
                card(b, "m1", "3"),
                card(c, "m1", "5"),
                card(a, "m3", "4"),
                card(c, "m4", "6"),
            ]
        )
        async with pool.acquire() as conn, conn.transaction():
            await derive(conn, middle, middle + 5, lambda _model, _total: None)
            rows = await conn.fetch(
                "SELECT idx, type, agent, payload FROM webhook_events WHERE idx >= $1 ORDER BY seq", middle
            )
    finally:
        await pool.close()
    events = [(r["idx"], r["type"], r["agent"], json.loads(r["payload"])) for r in rows]
    agent, other = card_subject(a.public_key).name, card_subject(c.public_key).name
    assert [(i, t, who) for i, t, who, _ in events] == [
        (middle, "card.changed", agent),
        (middle + 3, "card.changed", agent),
        (middle + 4, "card.changed", other),  # c's first card is in the range too
    ]  # b's first card changes nothing
    changes = [body["data"]["changes"] for *_, body in events]
    assert changes == [
        {"model": {"old": "m1", "new": "m2"}},
        {"model": {"old": "m2", "new": "m3"}},
        {"model": {"old": "m1", "new": "m4"}},
    ]
