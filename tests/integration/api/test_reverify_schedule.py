"""Scheduled re-verification: one round per agent and period, whoever schedules it and however often.

Each scheduled run re-asks an agent sampled items of its latest report, seeded by a checkpoint's root, and
every mismatch it logs is keyed by that seed, so it counts in the agent's integrity on its own. Before,
each scheduling drew its seeds from the newest checkpoint: a worker that took the "re-verification" lease
over (after a crash, or beside an old holder still finishing its step) scheduled a second round in the
same period, and two schedulers racing scheduled two runs of one report; an agent could be charged twice
for one period by the operator's failovers. Now the period's first scheduling fixes its checkpoint in the
database (migration 0023) and every other scheduling of that period derives the same seeds.
"""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import asyncpg
import msgspec
from litestar import Litestar
from litestar.testing import AsyncTestClient

from tests.helpers import new_card
from trustscore.api.app import create_app
from trustscore.exams.loader import DEFAULT_PUBLIC_DIR, ExamDirs, load_exam
from trustscore.ledger import keys
from trustscore.sdk import agent_from_spec, run_exam
from trustscore.sdk.runner import sign_run
from trustscore.services.log import LogService
from trustscore.services.reverify import Reverifier, ReverifyConfig
from trustscore.settings import Settings
from trustscore.store import db
from trustscore.store.log import LogStore
from trustscore.store.reverify import ReverifyStore

AGENTS = DEFAULT_PUBLIC_DIR.parent / "examples" / "agents" / "scripted.py"
DAY = 86_400.0


async def post(client: AsyncTestClient[Litestar], path: str, body: object) -> None:
    r = await client.post(path, content=msgspec.json.encode(body))
    assert r.status_code == 201, r.text


async def integrated(log_service: LogService) -> int:
    """Wait until the newest checkpoint covers the whole log; its size."""
    for _ in range(600):
        size = await log_service.store.sequenced_size()
        cp = await log_service.store.latest_checkpoint()
        if cp is not None and cp.size == size:
            return size
        await asyncio.sleep(0.05)
    raise AssertionError("the log was not integrated")


async def scheduled(pool: asyncpg.Pool, agent: str) -> list[tuple[bytes, int]]:
    rows = await pool.fetch(
        "SELECT seed, checkpoint_size FROM reverify_runs WHERE agent = $1 AND trigger = 'schedule' "
        "ORDER BY checkpoint_size",
        agent,
    )
    return [(bytes(r["seed"]), r["checkpoint_size"]) for r in rows]


async def test_a_period_is_scheduled_once_however_many_workers_schedule_it(tmp_path: Path, dsn: str) -> None:
    settings = Settings(data_dir=tmp_path / "data", integrate_interval=0.05, reverify_deadline=2.0)
    async with AsyncTestClient(app=create_app(settings, dsn)) as client:
        agent, card = new_card("reverified", endpoint="https://agent.example/a2a")
        await post(client, "/v1/log/entries", card)
        run = run_exam(load_exam("integrity@1", ExamDirs()), agent_from_spec(f"python:{AGENTS}:good"))
        await post(client, "/v1/reports", sign_run(run, agent))
        pool = await db.create_pool(dsn, min_size=1, max_size=4)
        try:
            for _ in range(600):  # the report's own run (its endpoint refused or unreachable: still closed)
                if await pool.fetchval(
                    "SELECT bool_and(state = 'done') FROM reverify_runs WHERE agent = $1", agent.id
                ):
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError("the report's own run never closed")
            await post(client, "/v1/log/entries", new_card("other")[1])  # past the report's own seed
            log_service = LogService(
                LogStore(pool), keys.read_key_file(settings.log_key_file), settings.log_origin, max_batch=100
            )
            first_size = await integrated(log_service)

            def worker() -> Reverifier:  # a process of its own, on the same database
                return Reverifier(
                    log_service,
                    ReverifyStore(pool),
                    keys.read_key_file(settings.reverify_key_file),
                    ExamDirs(),
                    ReverifyConfig(interval=DAY),
                )

            start = (time.time() // DAY + 30) * DAY  # a period nobody has scheduled yet
            due = start + 100.0
            assert sorted(
                await asyncio.gather(worker().schedule_period(due), worker().schedule_period(due))
            ) == [0, 1]
            [(seed, size)] = await scheduled(pool, agent.id)
            assert size == first_size
            # The run is carried out; the log grows; a worker takes the job over within the same period
            # (before: a second round, seeded by the newer checkpoint).
            await pool.execute("UPDATE reverify_runs SET state = 'done' WHERE agent = $1", agent.id)
            await post(client, "/v1/log/entries", new_card("later")[1])
            assert await integrated(log_service) > first_size
            assert await worker().schedule_period(start + DAY / 2) == 0
            assert await scheduled(pool, agent.id) == [(seed, first_size)]
            # The next period has a round of its own, from the checkpoint newest when it was scheduled.
            assert await worker().schedule_period(start + DAY + 100.0) == 1
            rounds = await scheduled(pool, agent.id)
            assert len(rounds) == 2 and rounds[1][1] > first_size and rounds[1][0] != seed
        finally:
            await pool.close()
