"""Every per-address allowance (writes, grading slots, attestation makings, connections) was keyed on the
client's exact address. One IPv6 host is commonly given a whole /64 (2^64 addresses) and can send each
request from a new one: every request had a fresh allowance, and the write limits bounded nothing. An
IPv6 client is now charged as its /64, an IPv4-mapped IPv6 address as the IPv4 address it carries."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from typing import Any

import httpx
import msgspec
import pytest
from litestar.testing import AsyncTestClient

from tests.integration.api.test_attestation_limits import World, held_at_leaves
from tests.integration.api.test_attestation_limits import world as world  # the fixture
from tests.integration.api.test_attestations import Client, from_address, on_app
from trustscore.api.app import create_app
from trustscore.cli.agent import card_envelope
from trustscore.ledger import keys
from trustscore.settings import Settings

BURST = 5


def card() -> bytes:
    return msgspec.json.encode(card_envelope(keys.SigningKey.generate(), "n"))


async def test_addresses_of_one_ipv6_network_share_one_write_allowance(settings: Settings, dsn: str) -> None:
    tight = replace(settings, address_rate_per_minute=BURST)
    async with AsyncTestClient(app=create_app(tight, dsn)) as client:

        async def post(host: str, path: str, content: bytes) -> int:
            async with from_address(client, host) as c:
                return (await c.post(path, content=content)).status_code

        async def run() -> list[int]:
            return [
                # The plain append (api/fast_append.py), the services' charges (a refused report or
                # settlement costs its token) and the framework's (any other POST costs one), each from
                # another address of one /64.
                await post("2001:db8:0:1::1", "/v1/log/entries", card()),
                await post("2001:db8:0:1:ffff:ffff:ffff:ffff", "/v1/reports", b"{}"),
                await post("2001:db8:0:1::3", "/v1/settlements", b"{}"),
                await post("2001:db8:0:1:1234::4", "/v1/sittings/1/dialogue", b"{}"),
                await post("2001:db8:0:1::5", "/v1/log/entries", card()),
                await post("2001:db8:0:1::6", "/v1/log/entries", card()),  # a sixth: none left
                await post("2001:db8:0:1::7", "/v1/events", b"{}"),
                await post("2001:db8:0:2::1", "/v1/log/entries", card()),  # another /64: its own
            ]

        codes = await on_app(client, run)
        assert codes == [201, 400, 400, 400, 201, 429, 429, 201], codes


async def test_an_ipv4_mapped_address_is_charged_as_its_ipv4_address(settings: Settings, dsn: str) -> None:
    tight = replace(settings, address_rate_per_minute=2)
    async with AsyncTestClient(app=create_app(tight, dsn)) as client:

        async def post(host: str) -> int:
            async with from_address(client, host) as c:
                return (await c.post("/v1/log/entries", content=card())).status_code

        async def run() -> list[Any]:
            return [await post(h) for h in ("203.0.113.7", "::ffff:203.0.113.7", "::ffff:cb00:7107", "::1")]

        codes = await on_app(client, run)
        assert codes == [201, 201, 429, 201], codes


async def test_addresses_of_one_ipv6_network_start_one_attestation_making_at_a_time(
    client: Client, world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    gate = held_at_leaves(monkeypatch)
    busy, other = world.agents

    async def get(host: str, agent: str) -> httpx.Response:
        async with from_address(client, host) as c:
            return await c.get(f"/v1/agents/{agent}/rating/attestation")

    async def overlapping() -> list[httpx.Response]:
        first = asyncio.ensure_future(get("2001:db8:0:1::1", busy.id))
        for _ in range(1000):
            if world.service._makers:
                break
            await asyncio.sleep(0.01)
        second = await get("2001:db8:0:1::2", other.id)  # another address of the /64: refused
        assert dict(world.service._makers) == {"2001:db8:0:1::/64": 1}
        gate.set()
        return [second, await first]

    second, first = await on_app(client, overlapping)
    assert second.status_code == 429 and "2001:db8:0:1::/64" in second.text, second.text
    assert first.status_code == 200
