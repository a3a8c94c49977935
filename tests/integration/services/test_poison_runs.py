"""A run that keeps failing must not hold the queue, must not be starved by newer runs, and a failure that is
not the run's own (the database or the network away, a directory missing on one worker) must not close
the queue's runs.

Scope runs and re-verification runs were claimed oldest first, and only a TrustscoreError counted against
a run's attempts: anything else escaped the step, the run stayed pending, and every later step claimed the
same run first and failed again, so one agent whose card tripped a bug stopped scope runs (or
re-verification) for every agent. Reviews of the first fixes found that closing on any exception within
one step let a short outage close every pending run, and that claiming fewest attempts first starved a run
that had failed once while new runs kept arriving. Now any failure is an attempt and makes the run due
again later (``retry_s``, four times longer per attempt; migration 0020), the queue goes on with the runs
due, and a run is closed after its last attempt.
"""

from __future__ import annotations

import asyncio
import datetime as dt

import asyncpg
import msgspec
import pytest

from trustscore.canonical import b64encode
from trustscore.exams.loader import ExamDirs
from trustscore.kinds import cards
from trustscore.kinds.reverification import run_nonce as reverify_run_nonce
from trustscore.kinds.scope_run import run_nonce as scope_run_nonce
from trustscore.ledger import dsse, keys, statements
from trustscore.ledger.submission import check, prepare
from trustscore.services.metrics import Metrics
from trustscore.services.reverify import Reverifier, ReverifyConfig
from trustscore.services.scope_runs import ScopeRunConfig, ScopeRunner
from trustscore.store.log import LogStore
from trustscore.store.reverify import ReverifyStore, Run
from trustscore.store.scope import ScopeStore


async def due_now(pool: asyncpg.Pool, table: str) -> None:
    """The retry delay passes."""
    await pool.execute(f"UPDATE {table} SET not_before = now() WHERE state = 'pending'")


async def waits(pool: asyncpg.Pool, table: str) -> list[float]:
    """Seconds until each pending run is due again, rounded to ten."""
    rows = await pool.fetch(
        f"SELECT extract(epoch FROM not_before - now())::float AS s FROM {table} WHERE state = 'pending' ORDER BY agent"
    )
    return [round(r["s"], -1) for r in rows]


async def test_a_scope_run_that_raises_goes_behind_the_others_and_is_closed_after_its_attempts(
    pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, config = ScopeStore(pool), ScopeRunConfig()
    runner = ScopeRunner(None, store, keys.SigningKey.generate(), ExamDirs(), config)  # type: ignore[arg-type]
    assert await store.schedule_run("ts1_poison", "week:1", "schedule", 100)
    assert await store.schedule_run("ts1_healthy", "week:1", "schedule", 100)
    carried: list[str] = []

    async def carry_out(agent: str, run_key: str, trigger: str, attempt: int) -> None:
        if agent == "ts1_poison":
            raise KeyError("a field no check foresaw")
        carried.append(agent)
        await store.finish_run(agent, run_key, attempt=attempt, entry_index=None, reason="done")

    monkeypatch.setattr(runner, "_carry_out", carry_out)
    assert await runner.work_once()  # the oldest: the poison, its first attempt, due again in a minute
    assert await runner.work_once()  # then the healthy run
    assert carried == ["ts1_healthy"]
    assert not await runner.work_once()  # the poison is not due yet
    assert await waits(pool, "scope_runs") == [60.0]
    await due_now(pool, "scope_runs")
    assert await runner.work_once()
    assert await waits(pool, "scope_runs") == [240.0]  # four times longer
    await due_now(pool, "scope_runs")
    assert await runner.work_once()  # the last attempt
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
    assert await reverifier.work_once()
    assert await reverifier.work_once()
    assert carried == ["ts1_healthy"]
    for _ in range(config.max_attempts - 1):
        assert not await reverifier.work_once()
        await due_now(pool, "reverify_runs")
        assert await reverifier.work_once()
    assert await store.runs_of("ts1_poison") == [(7, "done", None, None)]
    assert not await reverifier.work_once()


#: Three pending runs after one step in which each failed for a reason not theirs: one attempt each, none
#: closed, each due again in a minute.
ONE_FAILED_ATTEMPT = [("pending", 1)] * 3


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

    async def carry_out(agent: str, run_key: str, trigger: str, attempt: int) -> None:
        raise ConnectionResetError("the database went away for a second")

    monkeypatch.setattr(runner, "_carry_out", carry_out)
    await runner.step(asyncio.Event())  # the step ends once no run is due
    assert await waits(pool, "scope_runs") == [60.0] * 3
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
    await reverifier.sweep_and_work(asyncio.Event())
    assert await waits(pool, "reverify_runs") == [60.0] * 3
    assert await states(pool, "reverify_runs") == ONE_FAILED_ATTEMPT


async def test_a_run_that_failed_once_is_not_starved_by_runs_arriving_after_it(
    pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(Found by review of the fewest-attempts-first order.) While new runs keep arriving, a run that
    failed once goes again once it is due, before the runs that arrived after its retry time."""
    store = ScopeStore(pool)
    runner = ScopeRunner(None, store, keys.SigningKey.generate(), ExamDirs(), ScopeRunConfig(retry_s=0.0))  # type: ignore[arg-type]
    assert await store.schedule_run("ts1_flaky", "week:1", "schedule", 10_000)
    failed: list[str] = []
    carried: list[str] = []

    async def carry_out(agent: str, run_key: str, trigger: str, attempt: int) -> None:
        if agent == "ts1_flaky" and not failed:
            failed.append(agent)
            raise TimeoutError("one slow answer")
        carried.append(agent)
        await store.finish_run(agent, run_key, attempt=attempt, entry_index=None, reason="done")

    monkeypatch.setattr(runner, "_carry_out", carry_out)
    for i in range(5):
        assert await store.schedule_run(f"ts1_new{i}", "week:2", "schedule", 10_000)
        assert await runner.work_once()
    assert failed == ["ts1_flaky"] and carried[:2] == ["ts1_new0", "ts1_flaky"]


async def test_a_run_that_never_finishes_is_closed_after_its_attempts_and_failures_are_counted(
    pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(Found by review.) A run whose carry-out ends its process (OOM, a crash) is claimed again at each
    start, first, and never reaches the failure path that closes runs: it is closed once claimed more
    times than it may be attempted. Failed runs count in the background failures metric, under the job."""
    store, config, metrics = ScopeStore(pool), ScopeRunConfig(), Metrics()
    assert await store.schedule_run("ts1_crashing", "week:1", "schedule", 100)
    for _ in range(config.max_attempts):  # each claim "ends the process" (nothing after it runs) ...
        assert await store.claim_run(0.0) is not None  # ... and its hold has passed when it restarts
    failures = metrics.background_failures
    runner = ScopeRunner(None, store, keys.SigningKey.generate(), ExamDirs(), config, failures=failures)  # type: ignore[arg-type]
    assert await runner.work_once()
    [(state, reason)] = await pool.fetch("SELECT state, reason FROM scope_runs")
    assert (state, reason) == ("skipped", "never finished")

    async def carry_out(agent: str, run_key: str, trigger: str, attempt: int) -> None:
        raise ValueError("a bug")

    monkeypatch.setattr(runner, "_carry_out", carry_out)
    assert await store.schedule_run("ts1_buggy", "week:1", "schedule", 100)
    assert await runner.work_once()
    assert 'trustscore_background_failures_total{task="scope runs"} 2.0' in metrics.render().decode()


async def logged_with(pool: asyncpg.Pool, key: keys.SigningKey, nonce: str) -> int:
    """An entry signed by ``key`` with ``nonce`` (a card: any statement the runner's key signed with the
    run's nonce stands for what an attempt logged before it failed or its process ended)."""
    card = cards.AgentCard(
        nonce=nonce,
        issued_at=statements.format_time(dt.datetime.now(dt.UTC)),
        public_key=b64encode(key.public_key),
        name="runner",
        capabilities=[],
    )
    payload = statements.make_statement(cards.AGENT_CARD, cards.card_subject(key.public_key), card)
    envelope = msgspec.to_builtins(dsse.sign(payload, [key]))
    [appended] = await LogStore(pool).append([check(prepare(envelope), {key.id: bytes(key.public_key)}.get)])
    return appended.index


async def test_a_scope_run_whose_attempt_logged_its_entry_is_closed_with_it(
    pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """(Limit noted since session 10.) An attempt that logged the run's entry and then failed, or whose
    process ended, left a run closed as skipped without it, though its result is in the log; the run's
    nonce finds it, as a retry's does."""
    store, config, key = ScopeStore(pool), ScopeRunConfig(), keys.SigningKey.generate()
    runner = ScopeRunner(None, store, key, ExamDirs(), config)  # type: ignore[arg-type]
    for agent in ("ts1_crashed", "ts1_failed"):
        assert await store.schedule_run(agent, "week:1", "schedule", 100)
    crashed = await logged_with(pool, key, scope_run_nonce("ts1_crashed", "week:1"))
    failed = await logged_with(pool, key, scope_run_nonce("ts1_failed", "week:1"))
    await pool.execute(f"UPDATE scope_runs SET attempts = {config.max_attempts} WHERE agent = 'ts1_crashed'")
    await pool.execute(
        f"UPDATE scope_runs SET attempts = {config.max_attempts - 1} WHERE agent = 'ts1_failed'"
    )

    async def carry_out(agent: str, run_key: str, trigger: str, attempt: int) -> None:
        raise ConnectionResetError("the database went away after the entry was logged")

    monkeypatch.setattr(runner, "_carry_out", carry_out)
    assert await runner.work_once() and await runner.work_once()
    assert await store.runs_of("ts1_crashed") == [("week:1", "schedule", "done", crashed, None)]
    assert await store.runs_of("ts1_failed") == [("week:1", "schedule", "done", failed, None)]


async def test_a_reverification_run_whose_attempt_logged_its_entry_is_closed_with_it(
    pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, config, key = ReverifyStore(pool), ReverifyConfig(), keys.SigningKey.generate()
    reverifier = Reverifier(None, store, key, ExamDirs(), config)  # type: ignore[arg-type]
    seed = b"s" * 32
    for agent, index in (("ts1_crashed", 7), ("ts1_failed", 8)):
        assert await store.schedule(Run(agent, index, seed, "schedule", 10, "https://a.example", 0))
    crashed = await logged_with(pool, key, reverify_run_nonce("ts1_crashed", 7, seed))
    failed = await logged_with(pool, key, reverify_run_nonce("ts1_failed", 8, seed))
    await pool.execute(
        f"UPDATE reverify_runs SET attempts = {config.max_attempts} WHERE agent = 'ts1_crashed'"
    )
    await pool.execute(
        f"UPDATE reverify_runs SET attempts = {config.max_attempts - 1} WHERE agent = 'ts1_failed'"
    )

    async def carry_out(run: Run) -> None:
        raise ConnectionResetError("the database went away after the entry was logged")

    monkeypatch.setattr(reverifier, "_carry_out", carry_out)
    assert await reverifier.work_once() and await reverifier.work_once()
    assert await store.runs_of("ts1_crashed") == [(7, "done", crashed, None)]
    assert await store.runs_of("ts1_failed") == [(8, "done", failed, None)]
