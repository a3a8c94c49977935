"""The attestation route is anyone's and its cost grows with the rating's entries and their bytes (~0.2 ms
of CPU and ~2.1 KB for a marketplace event, ~17.5 KB for a snapshot entry of 100 rows, ~151 KB for one
of 1,000 as logs written before 2026-12-06 hold): a
client asking again and again for the bundle of the agent with the most evidence made the server build,
verify and send it each time, without bound. Now a bundle holds at most ``max_entries`` entries and
``max_bytes`` bytes of JSON (estimated before any leaf is read), one is made at a time per agent and
model and served again (a refusal too) for ``reuse_s`` seconds, the kept ones weigh at most ``kept_bytes``,
and the makings share a budget of leaf bytes (503 past a bounded wait)."""

from __future__ import annotations

import asyncio
import dataclasses
import threading
from typing import Any

import msgspec
import pytest

from tests.helpers import new_card
from tests.integration.api.test_attestations import Client, from_address, on_app, post, rated
from trustscore.api.attestation_routes import BundleOut
from trustscore.api.wiring import services_of
from trustscore.attestations import rating as attestation
from trustscore.canonical import b64decode
from trustscore.errors import StorageError
from trustscore.kinds.approvals import make_approval
from trustscore.kinds.events import make_event
from trustscore.kinds.parties import make_party_card
from trustscore.ledger import dsse, keys
from trustscore.services import attestations as attestations_module
from trustscore.services import logkey, snapshots
from trustscore.services.attestations import AttestationService, BundleLimits, json_estimate
from trustscore.settings import Settings
from trustscore.store.attestations import AttestationStore

EVENTS = 6
BASELINE = "baseline-v0.3"


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
        self.service._made.weight_limit = self.service.limits.kept_bytes  # (read once, at the start)


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


def held_at_leaves(monkeypatch: pytest.MonkeyPatch, failing: list[str] | None = None) -> threading.Event:
    """Hold every making at its read of leaves until the event returned is set (10 s at most); then the
    read fails if ``failing`` holds anything."""
    gate = threading.Event()
    leaves = AttestationStore.leaves

    async def held(self: AttestationStore, indexes: list[int]) -> Any:
        await asyncio.to_thread(gate.wait, 10)
        if failing:
            raise StorageError("the database went away")
        return await leaves(self, indexes)

    monkeypatch.setattr(AttestationStore, "leaves", held)
    return gate


def checkpoint_size(body: bytes) -> int:
    """The size of the checkpoint a bundle's proofs are against."""
    size: int = attestation.parse_attestation(attestation.decode_bundle(body).attestation).checkpoint.size
    return size


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
    world.limits(reuse_s=0.0)  # each request decides anew (a refusal is kept like a bundle)
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
    make = attestations_module._made_bundle

    async def counted(*args: Any, **kwargs: Any) -> Any:
        made.append(args[3])
        return await make(*args, **kwargs)

    monkeypatch.setattr(attestations_module, "_made_bundle", counted)
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
    first = await get(client, busy)  # what a bundle of busy weighs
    indexes = [e["index"] for e in first.json()["entries"]]
    leaf_bytes = await on_app(client, world.service.store.leaf_bytes, indexes)
    assert leaf_bytes == sum(len(b64decode(e["leaf"])) for e in first.json()["entries"])
    weight = json_estimate(leaf_bytes, len(indexes), checkpoint_size(first.content))
    service = AttestationService(
        world.service.public,
        world.service.store,
        world.service.key,
        BundleLimits(in_flight=weight, max_wait=0.3, reuse_s=0.0),
    )
    gate = asyncio.Event()
    leaves = AttestationStore.leaves
    holding: list[int] = []

    async def held(self: AttestationStore, indexes: list[int]) -> Any:
        holding.append(service._budget.used)
        await gate.wait()
        return await leaves(self, indexes)

    monkeypatch.setattr(AttestationStore, "leaves", held)
    encoding: list[int] = []

    class Encoder:  # the JSON is made under the making's hold too
        def encode(self, value: Any) -> bytes:
            encoding.append(service._budget.used)
            return msgspec.json.encode(value)

    monkeypatch.setattr(attestations_module, "_json", Encoder())

    async def two_agents() -> tuple[BaseException | bytes, ...]:
        making = asyncio.ensure_future(service.bundle_json(busy.id, None))
        for _ in range(1000):  # until the first making holds its bytes
            if holding:
                break
            await asyncio.sleep(0.01)
        # Bounded: without the budget this making would wait at the gate too.
        refused = await asyncio.gather(
            asyncio.wait_for(service.bundle_json(other.id, None), 5.0), return_exceptions=True
        )
        gate.set()
        return (*refused, await making)

    refused, body = await on_app(client, two_agents)
    assert holding == [weight]  # the first making held its weight; the second never read a leaf
    assert encoding == [weight]
    assert getattr(refused, "status", None) == 503 and refused.extra["retry_after"] >= 1  # type: ignore[union-attr]
    assert isinstance(body, bytes) and len(attestation.decode_bundle(body).entries) == len(indexes)
    assert service._budget.used == 0


async def test_snapshot_entries_and_leaf_bytes_are_counted_before_any_leaf_is_read(
    client: Client, world: World, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Snapshot entries grow with time for every rated agent (one per model per snapshot interval) and
    each carries up to 100 agents' rows (1,000 in logs written before 2026-12-06): under a model that
    reads them (baseline-v0.3) they are counted before they are listed, and a bundle whose leaves are too
    many bytes is refused before they are read."""
    busy = world.agents[0]
    service_key = logkey.load_or_create(settings.service_key_file)
    public = services_of(client.app.state).public
    size = 0
    for _ in range(3):
        taken = await on_app(client, snapshots.take, public.log, public.ratings, service_key)
        size = max(s.index for s in taken) + 1
    await rated(client, busy.id, BASELINE, size)
    world.limits(reuse_s=0.0)
    whole = await get(client, busy, model=BASELINE)
    listed: list[str] = []
    read: list[int] = []
    snapshot_entries, leaves = AttestationStore.snapshot_entries, AttestationStore.leaves

    async def listing(self: AttestationStore, *args: Any) -> Any:
        listed.append("snapshots")
        return await snapshot_entries(self, *args)

    async def reading(self: AttestationStore, indexes: list[int]) -> Any:
        read.append(len(indexes))
        return await leaves(self, indexes)

    monkeypatch.setattr(AttestationStore, "snapshot_entries", listing)
    monkeypatch.setattr(AttestationStore, "leaves", reading)
    world.limits(max_entries=EVENTS + 2)  # its events fit, its events and 3 snapshots do not
    r = await get(client, busy, model=BASELINE)
    assert r.status_code == 422 and f"more than {EVENTS + 2} log entries" in r.json()["detail"]
    assert listed == [] and read == []
    leaf_bytes = sum(len(b64decode(e["leaf"])) for e in whole.json()["entries"])
    weight = json_estimate(leaf_bytes, len(whole.json()["entries"]), checkpoint_size(whole.content))
    assert len(whole.content) <= weight <= len(whole.content) * 1.1 + 4096  # from above, and close
    world.limits(max_entries=100, max_bytes=weight - 1)
    r = await get(client, busy, model=BASELINE)
    assert r.status_code == 422, r.text
    assert f"a bundle of about {weight} bytes" in r.json()["detail"] and read == []
    world.limits(max_bytes=weight)
    r = await get(client, busy, model=BASELINE)
    assert r.status_code == 200 and read == [len(whole.json()["entries"])]


async def test_a_refusal_is_kept_like_a_bundle(
    client: Client, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    counts: list[str] = []
    count = AttestationStore.evidence_entry_count

    async def counting(self: AttestationStore, *args: Any) -> Any:
        counts.append(args[0])
        return await count(self, *args)

    monkeypatch.setattr(AttestationStore, "evidence_entry_count", counting)
    busy = world.agents[0]
    world.limits(max_entries=2)
    for _ in range(3):
        r = await get(client, busy)
        assert r.status_code == 422 and r.json()["type"].endswith("/too-large")
    assert counts == [busy.id]  # decided once, then given again
    world.limits(reuse_s=0.0)
    assert (await get(client, busy)).status_code == 422 and counts == [busy.id, busy.id]


async def test_kept_bundles_weigh_at_most_kept_bytes_and_expire(client: Client, world: World) -> None:
    busy, other = world.agents
    service = world.service
    first = await get(client, busy)
    world.limits(kept_bytes=len(first.content) + 1024)  # room for one of them
    await get(client, other)
    assert [k for k, _ in service._made] == [other.id]  # the older one made way
    assert service._made.weight == len((await get(client, other)).content) + 1024
    again = await get(client, busy)  # made again, and the other one makes way in turn
    assert again.content != first.content and [k for k, _ in service._made] == [busy.id]
    world.limits(reuse_s=0.0, kept_bytes=10**9)  # room for both: only expiry drops busy's now
    await asyncio.sleep(0.01)
    r = await get(client, other)
    assert [k for k, _ in service._made] == [other.id]  # busy's expired and was dropped on the way
    assert service._made.weight == len(r.content) + 1024


async def test_a_client_address_starts_one_making_at_a_time(
    client: Client, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Many heavy agents asked for at once from one address queued makings ahead of everyone else's:
    now the second making an address starts is refused (429), joining one already started is not, and
    other addresses go on."""
    gate = held_at_leaves(monkeypatch)
    busy, other = world.agents
    service = world.service

    async def from_one_address() -> list[Any]:
        first = asyncio.ensure_future(service.bundle_json(busy.id, None, "203.0.113.7"))
        await asyncio.sleep(0.2)
        joined = asyncio.ensure_future(service.bundle_json(busy.id, None, "203.0.113.7"))
        second = await asyncio.gather(
            service.bundle_json(other.id, None, "203.0.113.7"), return_exceptions=True
        )
        elsewhere = asyncio.ensure_future(service.bundle_json(other.id, None, "198.51.100.1"))
        await asyncio.sleep(0.2)
        assert dict(service._makers) == {"203.0.113.7": 1, "198.51.100.1": 1}
        gate.set()
        return [*second, await first, await joined, await elsewhere]

    refused, first, joined, elsewhere = await on_app(client, from_one_address)
    assert getattr(refused, "status", None) == 429 and refused.extra["retry_after"] >= 1
    assert first == joined and attestation.decode_bundle(elsewhere).entries
    assert not service._makers  # every making ended: nothing left charged
    # The route charges the client's address (the test client's is "testclient").
    charged: list[str | None] = []
    made = AttestationService.made

    async def charging(
        self: AttestationService, agent: str, model: str | None, address: str | None = None
    ) -> Any:
        charged.append(address)
        return await made(self, agent, model, address)

    monkeypatch.setattr(AttestationService, "made", charging)
    assert (await get(client, busy)).status_code == 200
    assert (await get(client, busy, format="vc")).status_code == 200
    assert charged == ["testclient", "testclient"]


async def test_over_http_a_second_making_from_one_address_is_a_429_and_every_refusal_is_counted(
    client: Client, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The route's answers as a client at one address gets them (a transport of its own on the app's loop,
    so that requests overlap), a making that fails frees its address, and the refusals are counted."""
    failing: list[str] = []
    gate = held_at_leaves(monkeypatch, failing)
    busy, other = world.agents
    metrics = world.service.metrics
    assert metrics is not None  # the app counts refusals

    def counted(code: str) -> float:
        value = metrics.registry.get_sample_value("trustscore_attestations_refused_total", {"code": code})
        return value or 0.0

    before = counted("rate-limited")

    async def overlapping() -> tuple[Any, ...]:
        async with from_address(client, "203.0.113.9") as c:
            url = "/v1/agents/{}/rating/attestation"
            first = asyncio.ensure_future(c.get(url.format(busy.id)))
            for _ in range(1000):
                if world.service._makers:
                    break
                await asyncio.sleep(0.01)
            second = await c.get(url.format(other.id), params={"format": "vc"})
            joined = asyncio.ensure_future(c.get(url.format(busy.id), params={"format": "vc"}))
            await asyncio.sleep(0.2)
            gate.set()
            return second, await first, await joined

    second, first, joined = await on_app(client, overlapping)
    assert second.status_code == 429, second.text
    assert second.headers["retry-after"] == "5"
    assert second.headers["content-type"].startswith("application/problem+json")
    assert second.json()["type"].endswith("/rate-limited") and second.json()["retry_after"] == 5
    assert first.status_code == 200 and joined.status_code == 200
    assert not world.service._makers and counted("rate-limited") == before + 1
    # A making that fails is not kept and frees its address.
    failing.append("yes")
    world.limits(reuse_s=0.0)
    r = await get(client, other)
    assert r.status_code == 503 and not world.service._makers
