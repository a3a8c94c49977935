"""Webhooks end to end in one app on a fresh database: subscriptions are admitted or refused, every
delivery verifies with the published key, a receiver that was down gets every event once by id in order
per agent, failures dead-letter, revocation stops deliveries, and the Atom feeds parse."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import feedparser  # type: ignore[import-untyped]
import msgspec
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from tests.integration.webhooks.parties import (
    agent_card,
    market_card,
    negative_event,
    revocation,
    subscription,
)
from tests.integration.webhooks.receiver import Receiver
from trustscore.api.app import create_app
from trustscore.errors import SignatureError
from trustscore.ledger import keys
from trustscore.settings import Settings
from trustscore.webhooks import signing

Client = AsyncTestClient[Litestar]
FAST: dict[str, Any] = {
    "project_interval": 0.05,
    "webhook_interval": 0.05,
    "webhook_backoff_base": 0.1,
    "webhook_backoff_cap": 0.4,
    "webhook_rate": 0.0,
}


@pytest.fixture
def allowed(settings: Settings) -> Settings:
    return replace(settings, outbound_allow_loopback=True, **FAST)


@pytest.fixture
async def wclient(allowed: Settings, dsn: str, receiver: Receiver) -> AsyncIterator[Client]:
    async with AsyncTestClient(app=create_app(allowed, dsn)) as c:
        receiver.public_key = (await c.get("/v1/webhooks/key")).json()["public_key"]
        yield c


async def post(client: Client, path: str, content: bytes, status: int = 201) -> dict[str, Any]:
    r = await client.post(path, content=content)
    assert r.status_code == status, r.text
    out: dict[str, Any] = r.json()
    return out


async def until(check: Callable[[], bool], seconds: float = 30.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def settled(client: Client, sid: int, delivered: int) -> None:
    """Wait until the dispatcher has recorded ``delivered`` deliveries (it records after the receipt)."""
    deadline = time.monotonic() + 30
    while (await client.get(f"/v1/subscriptions/{sid}/deliveries")).json()["delivered"] != delivered:
        assert time.monotonic() < deadline, "timed out"
        await asyncio.sleep(0.05)


async def setup_parties(client: Client, n_agents: int) -> tuple[keys.SigningKey, list[str]]:
    market, card = market_card()
    await post(client, "/v1/log/entries", card)
    agents = []
    for i in range(n_agents):
        key, card = agent_card(f"agent {i}")
        await post(client, "/v1/log/entries", card)
        agents.append(key.id)
    return market, agents


async def test_every_delivery_verifies_and_arrives_in_order_per_agent(
    wclient: Client, receiver: Receiver
) -> None:
    market, agents = await setup_parties(wclient, 3)
    sub = await post(wclient, "/v1/subscriptions", subscription(market, receiver.url, ["event.negative"]))
    indexes: dict[str, list[int]] = {a: [] for a in agents}
    for _ in range(4):
        for a in agents:
            out = await post(wclient, "/v1/events", negative_event(market, a))
            indexes[a].append(int(out["index"]))
    await until(lambda: len(receiver.accepted) == 12)
    assert receiver.bad == [] and receiver.repeats == 0
    assert receiver.per_agent() == indexes
    await settled(wclient, int(sub["index"]), 12)
    page = (await wclient.get(f"/v1/subscriptions/{sub['index']}/deliveries", params={"limit": 5})).json()
    assert page["delivered"] == 12 and page["pending"] == 0 and page["dead"] == 0
    assert len(page["attempts"]) == 5 and all(a["status"] == 204 for a in page["attempts"])
    rest = (
        await wclient.get(f"/v1/subscriptions/{sub['index']}/deliveries", params={"after": page["next"]})
    ).json()
    assert len(rest["attempts"]) == 7 and rest["next"] is None
    assert {a["event_id"] for a in page["attempts"] + rest["attempts"]} == {
        r.id for r in receiver.accepted.values()
    }
    assert set(receiver.accepted) == {
        signing.message_id(r.id, int(sub["index"])) for r in receiver.accepted.values()
    }


async def test_a_forged_or_replayed_delivery_does_not_verify(wclient: Client, receiver: Receiver) -> None:
    market, [agent] = await setup_parties(wclient, 1)
    sub = await post(wclient, "/v1/subscriptions", subscription(market, receiver.url, ["event.negative"]))
    await post(wclient, "/v1/events", negative_event(market, agent))
    await until(lambda: len(receiver.accepted) == 1)
    [receipt] = receiver.accepted.values()
    body = msgspec.json.encode(receipt.body)
    now = int(time.time())
    forged = signing.headers(keys.SigningKey.generate(), receipt.id, now, body)  # another key
    assert receiver.handle(forged, body) == 400
    old = signing.headers(keys.SigningKey.generate(), receipt.id, now - 3600, body)
    assert receiver.handle(old, body) == 400
    assert len(receiver.bad) == 2
    # A genuine delivery a subscriber forwards to another subscriber's URL (one key signs every delivery):
    # the signed webhook-id names the subscription it was made for, so the other's receiver refuses it.
    key = signing.parse_public_key(receiver.public_key)
    genuine = receipt.headers
    assert signing.verify(key, genuine, body, now, subscription=int(sub["index"]))
    with pytest.raises(SignatureError, match="another subscription"):
        signing.verify(key, genuine, body, now, subscription=int(sub["index"]) + 1)


async def test_a_receiver_down_for_a_while_gets_every_event_once_in_order(
    wclient: Client, receiver: Receiver
) -> None:
    market, agents = await setup_parties(wclient, 2)
    sub = await post(wclient, "/v1/subscriptions", subscription(market, receiver.url, ["event.negative"]))
    receiver.down = True
    indexes: dict[str, list[int]] = {a: [] for a in agents}
    for _ in range(5):
        for a in agents:
            out = await post(wclient, "/v1/events", negative_event(market, a))
            indexes[a].append(int(out["index"]))
    await until(lambda: receiver.refused >= 6)  # retried while down
    assert receiver.accepted == {}
    receiver.down = False
    await until(lambda: len(receiver.accepted) == 10)
    await asyncio.sleep(0.5)  # nothing more arrives: each id was delivered once
    assert receiver.repeats == 0 and receiver.bad == []
    assert receiver.per_agent() == indexes
    await settled(wclient, int(sub["index"]), 10)
    page = (await wclient.get(f"/v1/subscriptions/{sub['index']}/deliveries", params={"limit": 1000})).json()
    assert page["delivered"] == 10 and page["pending"] == 0
    failed = [a for a in page["attempts"] if a["status"] == 503]
    assert failed and all(a["error"] == "HTTP 503" for a in failed)


async def test_a_receiver_that_never_answers_well_is_dead_lettered_and_others_go_on(
    settings: Settings, dsn: str, receiver: Receiver
) -> None:
    s = replace(settings, outbound_allow_loopback=True, webhook_max_attempts=3, **FAST)
    async with AsyncTestClient(app=create_app(s, dsn)) as client:
        receiver.public_key = (await client.get("/v1/webhooks/key")).json()["public_key"]
        market, [agent] = await setup_parties(client, 1)
        sub = await post(client, "/v1/subscriptions", subscription(market, receiver.url, ["event.negative"]))
        receiver.down, receiver.status_when_down = True, 500
        await post(client, "/v1/events", negative_event(market, agent))
        url = f"/v1/subscriptions/{sub['index']}/deliveries"

        async def dead() -> int:
            return int((await client.get(url)).json()["dead"])

        deadline = time.monotonic() + 30
        while await dead() != 1:
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        page = (await client.get(url)).json()
        assert [a["attempt"] for a in page["attempts"]] == [3, 2, 1]
        assert all(a["state"] == "dead" and a["status"] == 500 for a in page["attempts"])
        assert receiver.refused == 3
        receiver.down = False  # a dead letter does not hold back the next event of that agent
        await post(client, "/v1/events", negative_event(market, agent))
        await until(lambda: len(receiver.accepted) == 1)


async def test_a_revoked_subscription_gets_nothing_more_and_only_its_subscriber_may_revoke(
    wclient: Client, receiver: Receiver
) -> None:
    market, [agent] = await setup_parties(wclient, 1)
    other, card = market_card()
    await post(wclient, "/v1/log/entries", card)
    sub = await post(
        wclient, "/v1/subscriptions", subscription(market, receiver.url, ["event.negative"], [agent])
    )
    r = await wclient.post("/v1/subscriptions", content=revocation(other, int(sub["index"])))
    assert r.status_code == 400 and r.headers["content-type"].startswith("application/problem+json")
    await post(wclient, "/v1/events", negative_event(market, agent))
    await until(lambda: len(receiver.accepted) == 1)
    await post(wclient, "/v1/subscriptions", revocation(market, int(sub["index"])))
    await post(wclient, "/v1/events", negative_event(market, agent))
    deadline = time.monotonic() + 30
    while len(feedparser.parse((await wclient.get(f"/agents/{agent}/feed.atom")).content).entries) != 2:
        assert time.monotonic() < deadline  # the second event is derived (it is in the feed) ...
        await asyncio.sleep(0.05)
    await asyncio.sleep(0.5)
    assert len(receiver.accepted) == 1  # ... but not delivered to the revoked subscription


@pytest.mark.parametrize(
    "url", ["http://127.0.0.1:9/hook", "http://localhost/hook", "http://[::1]/hook", "http://10.0.0.1/"]
)
async def test_a_loopback_or_private_subscription_is_refused_unless_allowed(client: Client, url: str) -> None:
    market, card = market_card()
    await post(client, "/v1/log/entries", card)
    before = len((await client.get("/v1/log/entries", params={"start": 0})).json()["entries"])
    r = await client.post("/v1/subscriptions", content=subscription(market, url, ["event.negative"]))
    assert r.status_code == 400, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert "refused" in r.json()["detail"]
    assert len((await client.get("/v1/log/entries", params={"start": 0})).json()["entries"]) == before


async def test_a_loopback_subscription_is_admitted_when_the_operator_allows_it(wclient: Client) -> None:
    market, card = market_card()
    await post(wclient, "/v1/log/entries", card)
    await post(
        wclient, "/v1/subscriptions", subscription(market, "http://127.0.0.1:9/hook", ["event.negative"])
    )


async def test_an_unregistered_subscriber_is_refused(wclient: Client) -> None:
    market, _ = market_card()  # never registered
    r = await wclient.post(
        "/v1/subscriptions", content=subscription(market, "http://127.0.0.1:9/", ["event.negative"])
    )
    assert r.status_code in (401, 403, 422) and r.headers["content-type"].startswith(
        "application/problem+json"
    )


async def test_feeds_parse_with_feedparser_and_are_bounded(
    settings: Settings, dsn: str, tmp_path: Path
) -> None:
    s = replace(settings, feed_length=3, project_interval=0.05)
    async with AsyncTestClient(app=create_app(s, dsn)) as client:
        market, agents = await setup_parties(client, 2)
        for _ in range(3):
            for a in agents:
                await post(client, "/v1/events", negative_event(market, a))
        # Feeds follow the projection, which runs in the background: wait until the agent's own feed has
        # its three events (the whole feed has three entries as soon as any three are projected).
        deadline = time.monotonic() + 30
        while True:
            r = await client.get("/feed.atom")
            whole = feedparser.parse(r.content)
            one = feedparser.parse((await client.get(f"/agents/{agents[0]}/feed.atom")).content)
            if len(whole.entries) == 3 and len(one.entries) == 3:
                break
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)
        assert r.headers["content-type"] == "application/atom+xml; charset=utf-8"
        assert not whole.bozo, whole.bozo_exception
        assert whole.version == "atom10"
        assert all(e.tags[0].term == "event.negative" for e in whole.entries)
        assert not one.bozo and len(one.entries) == 3
        assert all(agents[0] in e.title for e in one.entries)
        bad = await client.get("/agents/not-an-id/feed.atom")
        assert bad.status_code == 400 and bad.headers["content-type"].startswith("application/problem+json")
