"""Issue #10 attacks on ratings through the real API: a ring of fresh counterparties and self-registered
marketplaces lifting (or cutting) an agent, and a look-alike display name. Each failed before the defence
(the ring lifted a fresh agent from no rating to ~330; negative marketplace events moved totals by ~140)."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
from litestar import Litestar
from litestar.testing import AsyncTestClient

from tests.helpers import new_card
from trustscore.kinds.events import make_event
from trustscore.kinds.parties import make_party_card
from trustscore.kinds.settlements import make_settlement
from trustscore.ledger import dsse, keys

Client = AsyncTestClient[Litestar]
MODELS = ("trustscore-v2", "baseline-v0.3")


def body(env: Any) -> bytes:
    return msgspec.json.encode(env)


async def written(client: Client, path: str, env: Any) -> int:
    r = await client.post(path, content=body(env))
    assert r.status_code == 201, r.text
    data = r.json()
    index: int = data["entries"][0]["index"] if "entries" in data else data["index"]
    return index


async def rating(client: Client, agent: str, model: str, size: int) -> dict[str, Any]:
    for _ in range(400):
        r = await client.get(f"/v1/agents/{agent}/rating", params={"model": model})
        if r.status_code == 200 and r.json()["log_size"] >= size:
            data: dict[str, Any] = r.json()
            return data
        await asyncio.sleep(0.05)
    raise AssertionError(f"no rating of {agent} covering {size}")


async def party(client: Client, role: str = "counterparty") -> keys.SigningKey:
    key = keys.SigningKey.generate()
    await written(client, "/v1/log/entries", dsse.sign(make_party_card(key.public_key, "p", role), [key]))  # type: ignore[arg-type]
    return key


async def test_a_ring_of_fresh_keys_cannot_rate_a_fresh_agent(client: Client) -> None:
    agent, card = new_card("fresh")
    await written(client, "/v1/log/entries", card)
    last = 0
    for n in range(20):
        buyer = await party(client)
        deal = make_settlement(
            deal_id=f"ring-{n}",
            seller=agent.id,
            buyer=buyer.id,
            reporter_role="buyer",
            settled_at="2026-11-29T00:00:00Z",
            delivery="pass",
            confirmed=True,
        )
        last = await written(client, "/v1/settlements", dsse.sign(deal, [buyer]))
    for n in range(6):
        market = await party(client, "marketplace")
        for name in ("delivered", "confirmed", "signature_invalid"):
            event = make_event(
                marketplace=market.id,
                agent=agent.id,
                event=name,
                ref=f"m{n}",
                occurred_at="2026-11-29T00:00:00Z",
            )
            last = await written(client, "/v1/events", dsse.sign(event, [market]))
    for model in MODELS:
        rated = await rating(client, agent.id, model, last + 1)
        assert rated["total"] is None and rated["n"] == 0, (model, rated["total"])
        assert rated["standing_policy"] == "standing-v5"
    evidence = (await client.get(f"/v1/agents/{agent.id}/evidence")).json()["items"]
    assert evidence == []  # nothing stands beside them: the pool admits nothing


async def test_a_look_alike_name_is_flagged_with_the_original_id(client: Client) -> None:
    original, card = new_card("Acme Trading Agent")
    await written(client, "/v1/log/entries", card)
    copy, copy_card = new_card("Acmе Trading  agent")  # Cyrillic е, case, spacing
    await written(client, "/v1/log/entries", copy_card)
    for _ in range(200):
        r = await client.get(f"/v1/agents/{copy.id}")
        if r.status_code == 200:
            break
        await asyncio.sleep(0.05)
    shown = r.json()
    assert shown["id"] == copy.id and shown["name_confusable_with"] == [original.id]
    first = (await client.get(f"/v1/agents/{original.id}")).json()
    assert first["name_confusable_with"] == []
