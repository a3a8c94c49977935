"""A process serving HTTP reads every agent card into its directory at start, not in its first page's or
search's time (before, the first home page after a start read them all: ~0.2 s of its time at 20,000
agents, bench/README.md)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from tests.integration.api.test_sittings import register
from trustscore.api.app import create_app
from trustscore.api.wiring import services_of
from trustscore.services import agent_search
from trustscore.services.public import PublicService
from trustscore.settings import Settings


async def _projected(client: AsyncTestClient[Litestar], agents: list[str]) -> None:
    for _ in range(200):
        statuses = [(await client.get(f"/v1/agents/{agent}")).status_code for agent in agents]
        if statuses == [200] * len(agents):
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the cards were not projected")


async def _read_meanwhile(public: PublicService, agents: list[str]) -> bool:
    """Whether the directory holds ``agents`` within 10 s, with no request made meanwhile."""
    for _ in range(200):
        if set(agents) <= public.directory._index.agents.keys():
            return True
        await asyncio.sleep(0.05)
    return False


async def test_a_serving_process_reads_the_directory_at_start(tmp_path: Path, dsn: str) -> None:
    settings = Settings(data_dir=tmp_path / "data", integrate_interval=0.05)
    async with AsyncTestClient(app=create_app(settings, dsn)) as client:
        agents = [(await register(client)).id for _ in range(3)]
        await _projected(client, agents)
    # Started again: the cards are in the database, and no request asks for them.
    async with AsyncTestClient(app=create_app(settings, dsn)) as client:
        assert await _read_meanwhile(services_of(client.app.state).public, agents)


async def test_a_worker_does_not(tmp_path: Path, dsn: str) -> None:
    settings = Settings(data_dir=tmp_path / "data", integrate_interval=0.05)
    async with AsyncTestClient(app=create_app(settings, dsn)) as client:
        agents = [(await register(client)).id for _ in range(2)]
        await _projected(client, agents)
    worker = Settings(data_dir=tmp_path / "data", integrate_interval=0.05, role="worker")
    async with AsyncTestClient(app=create_app(worker, dsn)) as client:
        await asyncio.sleep(0.5)
        assert not services_of(client.app.state).public.directory._index.agents


async def test_and_makes_the_search_order(tmp_path: Path, dsn: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The first search after a start made the name order and waited for it (~0.4 s at 10^5 agents, ~5 s
    at 10^6): a serving process now makes it in the background from its start, as it reads the directory."""
    monkeypatch.setattr(agent_search, "REORDER", 1)  # the order made past one agent changed, not 2,048
    settings = Settings(data_dir=tmp_path / "data", integrate_interval=0.05)
    async with AsyncTestClient(app=create_app(settings, dsn)) as client:
        agents = [(await register(client)).id for _ in range(3)]
        await _projected(client, agents)
    async with AsyncTestClient(app=create_app(settings, dsn)) as client:
        public = services_of(client.app.state).public
        assert await _read_meanwhile(public, agents)
        for _ in range(200):
            if public.directory._index.ordered:
                break
            await asyncio.sleep(0.05)
        index = public.directory._index
        assert index.ordered and index.unordered == 0, "no order made with no search asked"
