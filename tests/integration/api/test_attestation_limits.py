"""The attestation route is anyone's and its cost grows with the rating's entries (~0.2 ms of CPU and
~1.9 KB each): a client asking again and again for the bundle of the agent with the most evidence made
the server build, verify and send it each time, without bound. Now a bundle holds at most
``max_entries`` (refused before any entry is read), one is made at a time per agent and model and served
again for ``reuse_s`` seconds, and the makings share a budget of entries (503 past a bounded wait)."""

from __future__ import annotations

import asyncio
import dataclasses
from typing import Any

import msgspec
import pytest

from tests.helpers import new_card
from tests.integration.api.test_attestations import Client, on_app, post, rated
from trustscore.api.attestation_routes import BundleOut
from trustscore.api.wiring import services_of
from trustscore.attestations import rating as attestation
from trustscore.kinds.approvals import make_approval
from trustscore.kinds.events import make_event
from trustscore.kinds.parties import make_party_card
from trustscore.ledger import dsse, keys
from trustscore.services import attestations as attestations_module
from trustscore.services import logkey
from trustscore.services.attestations import AttestationService, BundleLimits
from trustscore.settings import Settings
from trustscore.store.attestations import AttestationStore

EVENTS = 6


class World:
    def __init__(self, client: Client, market: keys.SigningKey, agents: list[keys.SigningKey]) -> None:
        self.client, self.market, self.agents = client, market, agents
        self.service = services_of(client.app.state).attestations
        self.refs = 0

    async def event(self, agent: keys.SigningKey) -> int:
        self.refs += 1
        event = make_event(
            marketplace=self.market.id,
            agent=agent.id,
            event="delivered",
            ref=f"o{self.refs}",
            occurred_at="2026-11-22T00:00:00Z",
        )
        return await post(self.client, "/v1/events", dsse.sign(event, [self.market]))

    def limits(self, **changes: Any) -> None:
        self.service.limits = dataclasses.replace(self.service.limits, **changes)


@pytest.fixture
async def world(client: Client, settings: Settings) -> World:
    """Two agents with EVENTS marketplace events each (one evidence entry apiece), rated."""
    log_key = logkey.load_or_create(settings.log_key_file)
    market = keys.SigningKey.generate()
    card = make_party_card(market.public_key, "m", "marketplace")
    await post(client, "/v1/log/entries", dsse.sign(card, [market]))
    approval = make_approval(operator=log_key.id, marketplace=market.id, action="approve")
    await post(client, "/v1/log/entries", dsse.sign(approval, [log_key]))
    agents = []
    for name in ("busy", "other"):
        agent, agent_card = new_card(name)
        await post(client, "/v1/log/entries", agent_card)
        agents.append(agent)
    w = World(client, market, agents)
    last = 0
    for agent in agents:
        for _ in range(EVENTS):
            last = await w.event(agent)
    for agent in agents:
        await rated(client, agent.id, "trustscore-v2", last + 1)
    return w


async def get(client: Client, agent: keys.SigningKey, **params: str) -> Any:
    return await client.get(f"/v1/agents/{agent.id}/rating/attestation", params=params)


async def test_a_bundle_of_more_entries_than_it_holds_is_refused_before_any_is_read(
    client: Client, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    read: list[list[int]] = []
    listed: list[str] = []
    leaves, evidence_entries = AttestationStore.leaves, AttestationStore.evidence_entries

    async def counted(self: AttestationStore, indexes: list[int]) -> Any:
        read.append(indexes)
        return await leaves(self, indexes)

    async def listing(self: AttestationStore, agent: str, size: int) -> Any:
        listed.append(agent)
        return await evidence_entries(self, agent, size)

    monkeypatch.setattr(AttestationStore, "leaves", counted)
    monkeypatch.setattr(AttestationStore, "evidence_entries", listing)
    busy = world.agents[0]
    world.limits(max_entries=EVENTS - 1)  # fewer than its evidence entries: the count stops it
    for format in ("bundle", "vc"):
        r = await get(client, busy, format=format)
        assert r.status_code == 422, r.text
        assert r.headers["content-type"].startswith("application/problem+json")
        problem = r.json()
        assert problem["type"].endswith("/too-large") and busy.id in problem["detail"]
        assert f"more than {EVENTS - 1} log entries" in problem["detail"]
    assert listed == []  # refused on a count that stops at the bound, before the entries are listed
    # As many as its evidence entries: the count passes, the cards the bundle needs besides do not.
    world.limits(max_entries=EVENTS)
    r = await get(client, busy)
    assert r.status_code == 422 and "more than 6 log entries" in r.json()["detail"]
    assert read == []  # no leaf was read for a refused bundle
    world.limits(max_entries=100)
    r = await get(client, busy)
    assert r.status_code == 200
    entries = len(r.json()["entries"])
    assert EVENTS < entries <= 100 and len(read) == 1


async def test_asking_again_is_served_the_bundle_already_made_until_it_is_old(
    client: Client, world: World
) -> None:
    busy = world.agents[0]
    first = await get(client, busy)
    assert first.status_code == 200
    last = await world.event(busy)  # the rating moves on
    await rated(client, busy.id, "trustscore-v2", last + 1)
    again = await get(client, busy)
    assert again.content == first.content  # the same signed bundle, nonce and all: nothing made
    # The body is the bundle's JSON as the route describes it, and verifies.
    bundle = attestation.decode_bundle(again.content)
    assert msgspec.json.encode(msgspec.json.decode(again.content, type=BundleOut)) == again.content
    old = attestation.parse_attestation(bundle.attestation)
    assert old.log_size <= last  # it names the rating it attests: the one before the new event
    world.limits(reuse_s=0.0)
    fresh = await get(client, busy)
    new = attestation.parse_attestation(attestation.decode_bundle(fresh.content).attestation)
    assert new.log_size > last and new.n == old.n + 1
    # A credential is made from the same kept bundle.
    world.limits(reuse_s=30.0)
    vc = await get(client, busy, format="vc")
    assert vc.status_code == 200 and vc.json()["credentialSubject"]["log_size"] == new.log_size


async def test_callers_asking_at_once_share_one_making(
    client: Client, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[str] = []
    build = attestations_module.build_bundle

    async def counted(*args: Any, **kwargs: Any) -> attestation.Bundle:
        made.append(args[3])
        return await build(*args, **kwargs)

    monkeypatch.setattr(attestations_module, "build_bundle", counted)
    busy, other = world.agents

    async def at_once(service: AttestationService) -> list[bytes]:
        return list(
            await asyncio.gather(
                *(service.bundle_json(busy.id, None) for _ in range(5)),
                service.bundle_json(other.id, None),
                service.bundle_json(busy.id, "baseline-v0.3"),
            )
        )

    bodies = await on_app(client, at_once, world.service)
    assert sorted(made) == sorted([busy.id, other.id, busy.id])  # one per agent and model
    assert len(set(bodies[:5])) == 1 and len(set(bodies)) == 3


async def test_a_caller_that_leaves_does_not_stop_the_making(
    client: Client, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = asyncio.Event()
    leaves = AttestationStore.leaves

    async def held(self: AttestationStore, indexes: list[int]) -> Any:
        await gate.wait()
        return await leaves(self, indexes)

    monkeypatch.setattr(AttestationStore, "leaves", held)
    busy = world.agents[0]

    async def leave_then_ask(service: AttestationService) -> tuple[bool, bytes]:
        first = asyncio.ensure_future(service.bundle_json(busy.id, None))
        await asyncio.sleep(0.2)
        first.cancel()
        gate.set()
        body = await service.bundle_json(busy.id, None)  # the making the first caller left
        return first.cancelled(), body

    cancelled, body = await on_app(client, leave_then_ask, world.service)
    assert cancelled and attestation.decode_bundle(body).entries


async def test_makings_past_the_budget_wait_then_are_refused_with_retry_after(
    client: Client, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    busy, other = world.agents
    first = await get(client, busy)  # how many entries a bundle of busy holds
    entries = len(first.json()["entries"])
    world.limits(reuse_s=0.0)
    service = AttestationService(
        world.service.public,
        world.service.store,
        world.service.key,
        BundleLimits(in_flight=entries, max_wait=0.3, reuse_s=0.0),
    )
    gate = asyncio.Event()
    leaves = AttestationStore.leaves
    holding: list[int] = []

    async def held(self: AttestationStore, indexes: list[int]) -> Any:
        holding.append(service._budget.used)
        await gate.wait()
        return await leaves(self, indexes)

    monkeypatch.setattr(AttestationStore, "leaves", held)

    async def two_agents() -> tuple[BaseException | bytes, ...]:
        making = asyncio.ensure_future(service.bundle_json(busy.id, None))
        await asyncio.sleep(0.1)
        # Bounded: without the budget this making would wait at the gate too.
        refused = await asyncio.gather(
            asyncio.wait_for(service.bundle_json(other.id, None), 5.0), return_exceptions=True
        )
        gate.set()
        return (*refused, await making)

    refused, body = await on_app(client, two_agents)
    assert holding == [entries]  # the first making held its entries; the second never read a leaf
    assert getattr(refused, "status", None) == 503 and refused.extra["retry_after"] >= 1  # type: ignore[union-attr]
    assert isinstance(body, bytes) and len(attestation.decode_bundle(body).entries) == entries
    assert service._budget.used == 0
