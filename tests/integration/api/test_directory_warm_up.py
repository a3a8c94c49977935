"""A process serving HTTP reads every agent card into its directory at start, not in its first page's or
search's time (before, the first home page after a start read them all: ~0.2 s of its time at 20,000
agents, bench/README.md)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from litestar import Litestar
from litestar.testing import AsyncTestClient

from tests.integration.api.test_sittings import register
from trustscore.api.app import create_app
from trustscore.api.wiring import services_of
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
