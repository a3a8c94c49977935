"""Audit HIGH 2 and MEDIUM 3, against a real app, real HTTP receivers and a tarpit (a listener that takes
connections and never answers).

Before, every delivery ran in the process's default thread pool (six threads on two cores, shared with
grading, attestations and rating refresh) and a dispatch round waited for its slowest delivery: 64
subscriptions to a tarpit delayed an honest subscriber's delivery from 0.1 s to 209 s and an attestation
read from 47 ms to 18 s. Now deliveries have their own threads, one host has at most
``webhook_host_concurrency`` of them, and a slow delivery holds back nothing but its own queue. And a
subscriber may hold at most ``webhook_max_subscriptions`` active subscriptions."""

from __future__ import annotations

import asyncio
import socket
import threading
import time
from collections.abc import AsyncIterator, Iterator
from dataclasses import replace

import asyncpg
import pytest
from litestar.testing import AsyncTestClient

from tests.integration.store.test_scope_marks import log_card
from tests.integration.webhooks.parties import agent_card, body, market_card, revocation, subscription
from tests.integration.webhooks.receiver import Receiver
from tests.integration.webhooks.test_webhooks_api import FAST, Client, post, until
from trustscore.api.app import create_app
from trustscore.cli.agent import card_envelope
from trustscore.ledger import keys
from trustscore.settings import Settings
from trustscore.store.webhooks import WebhookStore
from trustscore.webhooks.matching import host_key


class Tarpit:
    """Accepts connections on 127.0.0.2 (another host than the receiver's 127.0.0.1) and never answers."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.2", 0))
        self.sock.listen(512)
        self.held: list[socket.socket] = []
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def port(self) -> int:
        return int(self.sock.getsockname()[1])

    def _accept(self) -> None:
        while not self.closed:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.held.append(conn)

    def close(self) -> None:
        self.closed = True
        for c in self.held:
            c.close()
        self.sock.close()


@pytest.fixture
def tarpit() -> Iterator[Tarpit]:
    t = Tarpit()
    yield t
    t.close()


@pytest.fixture
async def slow_client(settings: Settings, dsn: str, receiver: Receiver) -> AsyncIterator[Client]:
    s = replace(settings, outbound_allow_loopback=True, **{**FAST, "webhook_timeout": 4.0})
    async with AsyncTestClient(app=create_app(s, dsn)) as c:
        receiver.public_key = (await c.get("/v1/webhooks/key")).json()["public_key"]
        yield c


async def test_tarpit_subscriptions_hold_back_neither_other_subscribers_nor_the_default_pool(
    slow_client: Client, receiver: Receiver, tarpit: Tarpit
) -> None:
    honest, card = market_card()
    await post(slow_client, "/v1/log/entries", card)
    await post(slow_client, "/v1/subscriptions", subscription(honest, receiver.url, ["card.changed"]))
    bystander, card = agent_card("bystander")
    await post(slow_client, "/v1/log/entries", card)
    attacker, card = agent_card("attacker")
    await post(slow_client, "/v1/log/entries", card)
    for i in range(24):  # more than the dispatcher's 16 requests at a time
        url = f"http://127.0.0.2:{tarpit.port}/t{i}"
        await post(slow_client, "/v1/subscriptions", subscription(attacker, url, ["card.changed"]))
    changed = card_envelope(attacker, "attacker", endpoint="https://b.example/x")  # one write: 24 deliveries
    await post(slow_client, "/v1/log/entries", body(changed))
    await until(lambda: len(receiver.accepted) == 1)  # the honest subscriber hears of it too
    await until(lambda: len(tarpit.held) >= 4)  # the tarpit holds deliveries now
    await asyncio.sleep(0.3)
    assert len(tarpit.held) == 4  # one host gets a few threads, never all of them

    started = time.monotonic()  # admission checks the URL in the default pool (as grading, attestations)
    await post(slow_client, "/v1/subscriptions", subscription(honest, receiver.url + "2", ["grade.changed"]))
    assert time.monotonic() - started < 1.0

    started = time.monotonic()
    changed = card_envelope(bystander, "bystander", endpoint="https://c.example/v1")
    await post(slow_client, "/v1/log/entries", body(changed))
    await until(lambda: len(receiver.accepted) == 2)
    assert time.monotonic() - started < 2.0  # before: after the tarpit's round, 4 s timeouts in waves


async def test_a_subscriber_may_hold_only_so_many_active_subscriptions(settings: Settings, dsn: str) -> None:
    s = replace(settings, outbound_allow_loopback=True, webhook_max_subscriptions=3, **FAST)
    async with AsyncTestClient(app=create_app(s, dsn)) as client:
        market, card = market_card()
        await post(client, "/v1/log/entries", card)
        first = [
            await post(
                client,
                "/v1/subscriptions",
                subscription(market, f"http://127.0.0.1:9/{i}", ["event.negative"]),
            )
            for i in range(3)
        ]
        r = await client.post(
            "/v1/subscriptions", content=subscription(market, "http://127.0.0.1:9/x", ["event.negative"])
        )
        assert r.status_code == 409, r.text
        assert r.headers["content-type"].startswith("application/problem+json")
        assert "3 active subscriptions" in r.json()["detail"]
        other, card = market_card()  # another subscriber has its own allowance
        await post(client, "/v1/log/entries", card)
        await post(
            client, "/v1/subscriptions", subscription(other, "http://127.0.0.1:9/x", ["event.negative"])
        )
        await post(client, "/v1/subscriptions", revocation(market, int(first[0]["index"])))

        async def admitted() -> bool:  # a revocation frees its place once projected
            r = await client.post(
                "/v1/subscriptions", content=subscription(market, "http://127.0.0.1:9/y", ["event.negative"])
            )
            return r.status_code == 201

        deadline = time.monotonic() + 30
        while not await admitted():
            assert time.monotonic() < deadline
            await asyncio.sleep(0.05)


async def test_due_gives_a_few_heads_per_host_and_none_in_flight(pool: asyncpg.Pool) -> None:
    """The outbox's ``due`` counts a host as ``host_key`` does (port, case and a trailing dot aside), so
    that many due heads of one host cannot fill a round and starve every other subscriber's."""
    urls = [
        "https://hooks.example/a",
        "http://HOOKS.example:8080/b?c",
        "https://hooks.example.:443/",
        "https://other.example/",
    ]
    assert len({host_key(u) for u in urls}) == 2
    heads = []
    for i, url in enumerate(urls):
        index = await log_card(pool, keys.SigningKey.generate(), "m1")
        await pool.execute(
            "INSERT INTO webhook_subscriptions (id, subscriber, url, events, agents, threshold) "
            "VALUES ($1, 'ts1_sub', $2, '{}', '{}', 0)",
            index,
            url,
        )
        seq = await pool.fetchval(
            "INSERT INTO webhook_events (id, idx, type, agent, at, payload) "
            "VALUES ($1, $2, 'card.changed', 'ts1_a', now(), '{}') RETURNING seq",
            f"evt_{i}",
            index,
        )
        await pool.execute(
            "INSERT INTO webhook_deliveries (subscription, event_seq, agent) VALUES ($1, $2, 'ts1_a')",
            index,
            seq,
        )
        heads.append((index, seq))
    store = WebhookStore(pool)
    assert len(await store.due(200)) == 4
    first = await store.due(200, per_host=1)
    assert sorted(host_key(d.url) for d in first) == ["hooks.example", "other.example"]
    busy = [(d.subscription, d.event_seq) for d in first]
    later = await store.due(200, per_host=1, busy=busy)
    assert len(later) == 1 and (later[0].subscription, later[0].event_seq) not in busy
    assert host_key(later[0].url) == "hooks.example"
