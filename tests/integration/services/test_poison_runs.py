"""A run that fails with an unexpected exception (a bug, an input no check foresaw) must not stop the queue,
and a failure that is not the run's own (the database or the network away, a missing directory) must not
close the queue's runs.

Scope runs and re-verification runs were claimed oldest first, and only a TrustscoreError counted against
a run's attempts: anything else escaped the step, the run stayed pending, and every later step claimed the
same run first and failed again, so one agent whose card tripped a bug stopped scope runs (or
re-verification) for every agent, forever. Now runs are claimed fewest attempts first (migration 0020);
an unexpected exception ends the step (the periodic loop logs, counts and backs off) with the attempt
counted, and after the last attempt the run is closed with the exception's class as its reason.
Review found that closing on any exception without ending the step burned every attempt of every run
within one step of a short outage: the last two tests.
"""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from trustscore.exams.loader import ExamDirs
from trustscore.ledger import keys
from trustscore.services.reverify import Reverifier, ReverifyConfig
from trustscore.services.scope_runs import ScopeRunConfig, ScopeRunner
from trustscore.store.reverify import ReverifyStore, Run
from trustscore.store.scope import ScopeStore


async def test_a_scope_run_that_raises_goes_behind_the_others_and_is_closed_after_its_attempts(
    pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, config = ScopeStore(pool), ScopeRunConfig()
    runner = ScopeRunner(None, store, keys.SigningKey.generate(), ExamDirs(), config)  # type: ignore[arg-type]
    assert await store.schedule_run("ts1_poison", "week:1", "schedule", 100)
    assert await store.schedule_run("ts1_healthy", "week:1", "schedule", 100)
    carried: list[str] = []

    async def carry_out(agent: str, run_key: str, trigger: str) -> None:
        if agent == "ts1_poison":
            raise KeyError("a field no check foresaw")
        carried.append(agent)
        await store.finish_run(agent, run_key, entry_index=None, reason="done")

    monkeypatch.setattr(runner, "_carry_out", carry_out)
    with pytest.raises(KeyError):
        await runner.work_once()  # the oldest: the poison, its first attempt
    assert await runner.work_once()  # then the healthy run, which has fewer attempts
    assert carried == ["ts1_healthy"]
    for _ in range(config.max_attempts - 1):
        with pytest.raises(KeyError):
            await runner.work_once()
    [(state, reason)] = await pool.fetch("SELECT state, reason FROM scope_runs WHERE agent = 'ts1_poison'")
    assert (state, reason) == ("skipped", "internal error (KeyError)")
    assert not await runner.work_once()  # nothing left


async def test_a_reverification_run_that_raises_goes_behind_the_others_and_is_closed_after_its_attempts(
    pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, config = ReverifyStore(pool), ReverifyConfig()
    reverifier = Reverifier(None, store, keys.SigningKey.generate(), ExamDirs(), config)  # type: ignore[arg-type]
    for agent, index in (("ts1_poison", 7), ("ts1_healthy", 8)):
        assert await store.schedule(Run(agent, index, b"s" * 32, "schedule", 10, "https://a.example", 0))
    carried: list[str] = []

    async def carry_out(run: Run) -> None:
        if run.agent == "ts1_poison":
            raise ZeroDivisionError("a bug")
        carried.append(run.agent)
        await store.finish(run, entry_index=None, same_as_index=None)

    monkeypatch.setattr(reverifier, "_carry_out", carry_out)
    with pytest.raises(ZeroDivisionError):
        await reverifier.work_once()
    assert await reverifier.work_once()
    assert carried == ["ts1_healthy"]
    for _ in range(config.max_attempts - 1):
        with pytest.raises(ZeroDivisionError):
            await reverifier.work_once()
    assert await store.runs_of("ts1_poison") == [(7, "done", None, None)]
    assert not await reverifier.work_once()


#: Three pending runs after one step that failed for a reason not theirs: one attempt spent, none closed.
ONE_FAILED_ATTEMPT = [("pending", 0), ("pending", 0), ("pending", 1)]


async def states(pool: asyncpg.Pool, table: str) -> list[tuple[str, int]]:
    return sorted(
        (r["state"], r["attempts"]) for r in await pool.fetch(f"SELECT state, attempts FROM {table}")
    )


async def test_a_transient_failure_during_one_scope_step_closes_no_run(
    pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ScopeStore(pool)
    runner = ScopeRunner(None, store, keys.SigningKey.generate(), ExamDirs(), ScopeRunConfig())  # type: ignore[arg-type]
    for i in range(3):
        assert await store.schedule_run(f"ts1_agent{i}", f"card:{i}", "declarations", 100)

    async def carry_out(agent: str, run_key: str, trigger: str) -> None:
        raise ConnectionResetError("the database went away for a second")

    monkeypatch.setattr(runner, "_carry_out", carry_out)
    with pytest.raises(ConnectionResetError):
        await runner.step(asyncio.Event())
    assert await states(pool, "scope_runs") == ONE_FAILED_ATTEMPT


async def test_a_transient_failure_during_one_reverification_step_closes_no_run(
    pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ReverifyStore(pool)
    reverifier = Reverifier(None, store, keys.SigningKey.generate(), ExamDirs(), ReverifyConfig())  # type: ignore[arg-type]
    for i in range(3):
        assert await store.schedule(
            Run(f"ts1_agent{i}", i, b"s" * 32, "schedule", 10, "https://a.example", 0)
        )

    async def carry_out(run: Run) -> None:
        raise FileNotFoundError("exams/private: not mounted on this worker")

    async def sweep() -> int:
        return 0

    monkeypatch.setattr(reverifier, "_carry_out", carry_out)
    monkeypatch.setattr(reverifier, "sweep", sweep)
    with pytest.raises(FileNotFoundError):
        await reverifier.sweep_and_work(asyncio.Event())
    assert await states(pool, "reverify_runs") == ONE_FAILED_ATTEMPT
