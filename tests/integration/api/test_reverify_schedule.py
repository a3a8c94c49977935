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
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import msgspec
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from tests.helpers import new_card
from trustscore.api.app import create_app
from trustscore.errors import NotYetAvailable
from trustscore.exams.loader import DEFAULT_PUBLIC_DIR, ExamDirs, load_exam
from trustscore.kinds.exam_report import EXAM_REPORT
from trustscore.kinds.reverification import sampling
from trustscore.ledger import audit, keys, merkle
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


async def report(client: AsyncTestClient[Litestar], agent: keys.SigningKey, persona: str = "good") -> None:
    run = run_exam(load_exam("integrity@1", ExamDirs()), agent_from_spec(f"python:{AGENTS}:{persona}"))
    await post(client, "/v1/reports", sign_run(run, agent))


async def runs_closed(pool: asyncpg.Pool, agent: str) -> None:
    """Wait until every run of ``agent`` is closed (the app's worker carries them out: the endpoint is
    unreachable, which is an outcome, not a failure)."""
    for _ in range(600):
        if await pool.fetchval("SELECT bool_and(state = 'done') FROM reverify_runs WHERE agent = $1", agent):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the runs of {agent} never closed")


@dataclass
class World:
    client: AsyncTestClient[Litestar]
    pool: asyncpg.Pool
    log: LogService
    worker: Callable[[], Reverifier]  # a new process's re-verifier, on the same database
    agent: keys.SigningKey  # declares an endpoint, has reported once; its report's own run is closed
    period: float  # the start of a period that nothing has scheduled, 30 days ago


@pytest.fixture
async def world(tmp_path: Path, dsn: str) -> AsyncIterator[World]:
    settings = Settings(data_dir=tmp_path / "data", integrate_interval=0.05, reverify_deadline=2.0)
    async with AsyncTestClient(app=create_app(settings, dsn)) as client:
        agent, card = new_card("reverified", endpoint="https://agent.example/a2a")
        await post(client, "/v1/log/entries", card)
        await report(client, agent)
        pool = await db.create_pool(dsn, min_size=1, max_size=4)
        try:
            await runs_closed(pool, agent.id)
            await post(client, "/v1/log/entries", new_card("other")[1])  # past the report's own seed
            log_service = LogService(
                LogStore(pool), keys.read_key_file(settings.log_key_file), settings.log_origin, max_batch=100
            )
            await integrated(log_service)

            def worker() -> Reverifier:
                return Reverifier(
                    log_service,
                    ReverifyStore(pool),
                    keys.read_key_file(settings.reverify_key_file),
                    ExamDirs(),
                    ReverifyConfig(interval=DAY),
                )

            yield World(client, pool, log_service, worker, agent, (time.time() // DAY - 30) * DAY)
        finally:
            await pool.close()


async def test_a_period_is_scheduled_once_however_many_workers_schedule_it(world: World) -> None:
    pool, agent, start = world.pool, world.agent, world.period
    first_size = await integrated(world.log)
    # Two workers at once (an old holder finishing its step beside the new one) agree on the checkpoint.
    both = await asyncio.gather(
        world.worker().schedule_period(start + 100), world.worker().schedule_period(start + 200)
    )
    assert sorted(both) == [0, 1]
    [(seed, size)] = await scheduled(pool, agent.id)
    assert size == first_size
    # The run is carried out; the log grows; a worker takes the job over within the same period
    # (before: a second round, seeded by the newer checkpoint, whose mismatch would count again).
    await pool.execute("UPDATE reverify_runs SET state = 'done' WHERE agent = $1", agent.id)
    await post(world.client, "/v1/log/entries", new_card("later")[1])
    assert await integrated(world.log) > first_size
    assert await world.worker().schedule_period(start + DAY / 2) == 0
    assert await scheduled(pool, agent.id) == [(seed, first_size)]
    # The next period has a round of its own, from the checkpoint newest when it was scheduled.
    assert await world.worker().schedule_period(start + DAY + 100) == 1
    rounds = await scheduled(pool, agent.id)
    assert len(rounds) == 2 and rounds[1][1] > first_size and rounds[1][0] != seed


async def test_a_period_scheduled_again_never_reverifies_a_report_the_agent_replaced(world: World) -> None:
    """(Found by review.) An agent skipped at the period's first scheduling (a run of its was pending)
    that reports again later in the period is not given, when the period is scheduled again (a restart),
    a run on its report before the period's checkpoint: the endpoint would be held to replaced answers."""
    pool, agent, start = world.pool, world.agent, world.period
    await pool.execute("UPDATE reverify_runs SET state = 'pending' WHERE agent = $1", agent.id)
    assert await world.worker().schedule_period(start + 100) == 0  # busy: skipped
    await pool.execute("UPDATE reverify_runs SET state = 'done' WHERE agent = $1", agent.id)
    await report(world.client, agent, "careless")  # a new report, after the period's checkpoint
    await runs_closed(pool, agent.id)
    await integrated(world.log)
    assert await world.worker().schedule_period(start + DAY / 2) == 0
    assert await scheduled(pool, agent.id) == []


async def test_a_worker_whose_clock_runs_ahead_fixes_no_future_period_and_misses_none(world: World) -> None:
    """(Found by review.) A period that does not begin within a minute by the database's clock is not
    scheduled, and the step fails so that the aligned job tries the same period again: its seeds would
    be fixed, and known, long before it comes. A clock a little ahead (two hosts' clocks) still
    schedules its period: the job wakes just after each boundary by its own clock."""
    ahead = (time.time() // DAY + 400) * DAY
    with pytest.raises(NotYetAvailable, match="clock is ahead"):
        await world.worker().schedule_period(ahead + 100)
    count = "SELECT count(*) FROM reverify_periods WHERE period_start_ms = $1"
    assert await world.pool.fetchval(count, round(ahead * 1000)) == 0
    worker = world.worker()
    worker.config = ReverifyConfig(interval=1.0)
    boundary = time.time() // 1 + 1  # the next second, ahead of the database's clock by up to a second
    assert await worker.schedule_period(boundary + 0.001) == 1
    assert await world.pool.fetchval(count, round(boundary * 1000)) == 1


async def test_scheduling_reads_no_leaf_and_seeds_from_the_reports_own_hash(
    world: World, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep after new reports and a period's schedule need each report's index, agent and statement
    hash, which the log keeps beside the leaf. They used to read and parse every report's leaf: the
    schedule every report in the log, at every period (at 10^6 reports, gigabytes read and parsed per
    period, and all of them held in memory at once). Neither may read a leaf now, and a scheduled run's
    seed is still the one its report's own bytes give."""
    store = world.log.store

    async def no_leaves(*args: object, **kwargs: object) -> list[tuple[int, bytes]]:
        raise AssertionError("scheduling read leaves")

    monkeypatch.setattr(store, "leaves_of_kind", no_leaves)
    pool, agent = world.pool, world.agent.id
    [row] = await pool.fetch(
        "SELECT leaf FROM entries WHERE subject = $1 AND kind = $2", agent, EXAM_REPORT.predicate_type
    )
    statement_hash = audit.parse_leaf(bytes(row["leaf"])).statement_hash

    async def expected(size: int) -> bytes:
        root = merkle.root_from_nodes(size, await store.nodes(merkle.frontier_nodes(size)))
        return sampling.seed(root, statement_hash, agent)

    [run] = await pool.fetch("SELECT seed, checkpoint_size FROM reverify_runs WHERE agent = $1", agent)
    assert bytes(run["seed"]) == await expected(run["checkpoint_size"])  # the report's own run
    worker = world.worker()  # a fresh worker sweeps from the log's start: that run again, nothing new
    assert await worker.sweep() == 0
    assert await worker.schedule_period(world.period + 100) == 1
    [(seed, size)] = await scheduled(pool, agent)
    assert seed == await expected(size)
