"""A run that fails with an unexpected exception (a bug, an input no check foresaw) must not stop the queue.

Scope runs and re-verification runs are claimed oldest first. Before, only a TrustscoreError counted
against a run's attempts: anything else escaped the step, the run stayed pending, and every later step
claimed the same run first and failed again, so one agent whose card or endpoint tripped a bug stopped
scope runs (or re-verification) for every agent, forever. Now any exception counts as a failed attempt,
and after the last attempt the run is closed with the exception's class as its reason.
"""

from __future__ import annotations

import asyncpg
import pytest

from trustscore.exams.loader import ExamDirs
from trustscore.ledger import keys
from trustscore.services.reverify import Reverifier, ReverifyConfig
from trustscore.services.scope_runs import ScopeRunConfig, ScopeRunner
from trustscore.store.reverify import ReverifyStore, Run
from trustscore.store.scope import ScopeStore


async def test_a_scope_run_that_raises_is_closed_after_its_attempts_and_the_queue_moves_on(
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
    for _ in range(config.max_attempts + 1):
        assert await runner.work_once()  # never raises: a failed attempt
    assert carried == ["ts1_healthy"]
    [(state, reason)] = await pool.fetch("SELECT state, reason FROM scope_runs WHERE agent = 'ts1_poison'")
    assert state != "pending" and reason == "internal error (KeyError)"
    assert not await runner.work_once()  # nothing left


async def test_a_reverification_run_that_raises_is_closed_after_its_attempts(
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
    for _ in range(config.max_attempts + 1):
        assert await reverifier.work_once()
    assert carried == ["ts1_healthy"]
    assert await store.runs_of("ts1_poison") == [(7, "done", None, None)]
    assert not await reverifier.work_once()
