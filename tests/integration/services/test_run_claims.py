"""A worker that loses a job's lease part-way through a step (its lease connection dropped: a network
partition, ``pg_terminate_backend``, an idle-session timeout) goes on with the run it holds while another
worker takes the job over. Re-verification and scope runs are calls to an agent's endpoint whose outcome
is logged, so neither may be carried out twice, and a late finisher must not rewrite the outcome.

Before, a claim only counted an attempt: the new holder claimed the very run the old one was carrying out
(both asked the agent, each spent an attempt, and the later ``finish`` overwrote the earlier outcome, a
logged entry's index with None), and the old holder then went on claiming runs until its queue was empty.
Now a claim holds its run for longer than a run may take, the claim's attempt number fences the run's
updates, and a step asks whether it still holds the lease before each further run.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

import asyncpg
import pytest

from trustscore.exams.loader import ExamDirs
from trustscore.ledger import keys
from trustscore.services.reverify import Reverifier, ReverifyConfig
from trustscore.services.scope_runs import ScopeRunConfig, ScopeRunner
from trustscore.store.reverify import ReverifyStore, Run
from trustscore.store.scope import ScopeStore

SEED = b"s" * 32


def pending_run(agent: str, index: int = 7) -> Run:
    return Run(agent, index, SEED, "schedule", 10, "https://a.example", 0)


async def row(pool: asyncpg.Pool, table: str, agent: str) -> tuple[str, int, int | None]:
    r = await pool.fetchrow(f"SELECT state, attempts, entry_index FROM {table} WHERE agent = $1", agent)
    assert r is not None
    return r["state"], r["attempts"], r["entry_index"]


async def hold_passes(pool: asyncpg.Pool, table: str) -> None:
    """Time passes beyond every claim's hold (the claimer died, or hangs)."""
    await pool.execute(f"UPDATE {table} SET not_before = now() WHERE state = 'pending'")


async def test_a_claimed_reverification_run_is_not_claimed_again_while_its_claim_holds(
    pool: asyncpg.Pool,
) -> None:
    store = ReverifyStore(pool)
    assert await store.schedule(pending_run("ts1_a"))
    first = await store.claim(hold=300.0)
    assert first is not None and first.attempts == 1
    assert await store.claim(hold=300.0) is None  # the worker that took the job over finds nothing due
    hold = await pool.fetchval("SELECT extract(epoch FROM not_before - now()) FROM reverify_runs")
    assert 290 < hold <= 300
    assert await store.finish(first, entry_index=42, same_as_index=None)
    assert await row(pool, "reverify_runs", "ts1_a") == ("done", 1, 42)


async def test_a_reverification_claim_overtaken_after_its_hold_changes_nothing(pool: asyncpg.Pool) -> None:
    store = ReverifyStore(pool)
    assert await store.schedule(pending_run("ts1_a"))
    stale = await store.claim(hold=300.0)
    assert stale is not None
    await hold_passes(pool, "reverify_runs")  # the first claimer hangs past its hold
    taken = await store.claim(hold=300.0)
    assert taken is not None and taken.attempts == 2
    assert not await store.retry_later(stale, 60.0)  # the stale claim neither postpones the run ...
    assert not await store.finish(stale, entry_index=None, same_as_index=None)  # ... nor closes it
    assert await row(pool, "reverify_runs", "ts1_a") == ("pending", 2, None)
    assert await store.finish(taken, entry_index=42, same_as_index=None)
    # A late finisher never rewrites a closed run (before: entry 42 became None).
    assert not await store.finish(taken, entry_index=None, same_as_index=None)
    assert await row(pool, "reverify_runs", "ts1_a") == ("done", 2, 42)


async def test_a_claimed_scope_run_is_not_claimed_again_and_an_overtaken_claim_changes_nothing(
    pool: asyncpg.Pool,
) -> None:
    store, hold = ScopeStore(pool), ScopeRunConfig().hold
    assert await store.schedule_run("ts1_a", "week:1", "schedule", 100)
    stale = await store.claim_run(hold=hold)
    assert stale == ("ts1_a", "week:1", "schedule", 1)
    assert await store.claim_run(hold=hold) is None
    await hold_passes(pool, "scope_runs")
    taken = await store.claim_run(hold=hold)
    assert taken == ("ts1_a", "week:1", "schedule", 2)
    assert not await store.retry_later("ts1_a", "week:1", 60.0, attempt=1)
    assert not await store.finish_run("ts1_a", "week:1", attempt=1, entry_index=None, reason="stale")
    assert await row(pool, "scope_runs", "ts1_a") == ("pending", 2, None)
    assert await store.finish_run("ts1_a", "week:1", attempt=2, entry_index=42, reason=None)
    assert not await store.finish_run("ts1_a", "week:1", attempt=2, entry_index=None, reason="late")
    assert await row(pool, "scope_runs", "ts1_a") == ("done", 2, 42)


def test_a_claim_holds_its_run_past_its_deadline() -> None:
    for config in (
        ReverifyConfig(),
        ReverifyConfig(deadline_s=4.0),
        ScopeRunConfig(),
        ScopeRunConfig(deadline_s=1.0),
    ):
        assert config.hold >= config.deadline_s + 10.0


class Lease:
    """One worker's view of the job's lease: held until ``lose``."""

    def __init__(self) -> None:
        self.held = True

    async def __call__(self) -> bool:
        return self.held

    def lose(self) -> None:
        """Its lease connection dropped: another worker may take the lease."""
        self.held = False


class Gate:
    """Holds every carry-out of the worker it is given to inside the agent's endpoint until opened."""

    def __init__(self) -> None:
        self.inside = asyncio.Event()
        self.open = asyncio.Event()

    async def pass_(self) -> None:
        self.inside.set()
        await self.open.wait()


async def lease_lost_mid_run(
    first_step: Callable[[], Coroutine[Any, Any, None]],
    second_step: Callable[[], Awaitable[None]],
    gate: Gate,
    lease: Lease,
    arrive: Callable[[], Awaitable[object]],
) -> None:
    """The first worker claims a run and is held inside it; it loses the lease; the second worker takes
    the job over and runs a step; a new run ``arrive``s; the run inside ends and the first worker's step
    goes on."""
    task = asyncio.create_task(first_step())
    await asyncio.wait_for(gate.inside.wait(), 30)
    lease.lose()
    await second_step()
    await arrive()
    gate.open.set()
    await asyncio.wait_for(task, 30)


async def test_a_reverification_worker_that_lost_the_lease_mid_run_is_not_joined_on_its_run_and_stops(
    pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ReverifyStore(pool)
    for i, agent in enumerate(("ts1_held", "ts1_next", "ts1_last")):
        assert await store.schedule(pending_run(agent, i))
    carried: list[tuple[str, str]] = []
    gate = Gate()
    old_lease = Lease()

    def worker(name: str, lease: Lease) -> Reverifier:
        reverifier = Reverifier(
            None,  # type: ignore[arg-type]  # no log: the carry-out below stands for it
            store,
            keys.SigningKey.generate(),
            ExamDirs(),
            ReverifyConfig(),
            leased=lease,
        )

        async def carry_out(run: Run) -> None:
            carried.append((name, run.agent))
            if name == "old":
                await gate.pass_()
            assert await store.finish(run, entry_index=100 + run.report_index, same_as_index=None)

        async def sweep() -> int:
            return 0

        monkeypatch.setattr(reverifier, "_carry_out", carry_out)
        monkeypatch.setattr(reverifier, "sweep", sweep)
        return reverifier

    old, new, stop = worker("old", old_lease), worker("new", Lease()), asyncio.Event()
    await lease_lost_mid_run(
        lambda: old.sweep_and_work(stop),
        lambda: new.sweep_and_work(stop),
        gate,
        old_lease,
        lambda: store.schedule(pending_run("ts1_arrived", 3)),
    )
    # Each run carried out once: the held run by the old worker only, the rest by the new one; the old
    # worker claimed nothing after its run (before: it went on draining the queue beside the new one).
    assert sorted(carried) == [("new", "ts1_last"), ("new", "ts1_next"), ("old", "ts1_held")]
    for i, agent in enumerate(("ts1_held", "ts1_next", "ts1_last")):
        assert await row(pool, "reverify_runs", agent) == ("done", 1, 100 + i)
    assert await row(pool, "reverify_runs", "ts1_arrived") == ("pending", 0, None)  # the new holder's


async def test_a_scope_worker_that_lost_the_lease_mid_run_is_not_joined_on_its_run_and_stops(
    pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    store = ScopeStore(pool)
    for agent in ("ts1_held", "ts1_next", "ts1_last"):
        assert await store.schedule_run(agent, "week:1", "schedule", 100)
    carried: list[tuple[str, str]] = []
    gate = Gate()
    old_lease = Lease()

    def worker(name: str, lease: Lease) -> ScopeRunner:
        runner = ScopeRunner(
            None,  # type: ignore[arg-type]  # no log: the carry-out below stands for it
            store,
            keys.SigningKey.generate(),
            ExamDirs(),
            ScopeRunConfig(),
            leased=lease,
        )

        async def carry_out(agent: str, run_key: str, trigger: str, attempt: int) -> None:
            carried.append((name, agent))
            if name == "old":
                await gate.pass_()
            assert await store.finish_run(agent, run_key, attempt=attempt, entry_index=1, reason=None)

        async def nothing() -> int:
            return 0

        monkeypatch.setattr(runner, "_carry_out", carry_out)
        monkeypatch.setattr(runner, "sweep_cards", nothing)
        monkeypatch.setattr(runner, "schedule_weekly", nothing)
        return runner

    old, new, stop = worker("old", old_lease), worker("new", Lease()), asyncio.Event()
    await lease_lost_mid_run(
        lambda: old.step(stop),
        lambda: new.step(stop),
        gate,
        old_lease,
        lambda: store.schedule_run("ts1_arrived", "week:1", "schedule", 100),
    )
    assert sorted(carried) == [("new", "ts1_last"), ("new", "ts1_next"), ("old", "ts1_held")]
    for agent in ("ts1_held", "ts1_next", "ts1_last"):
        assert await row(pool, "scope_runs", agent) == ("done", 1, 1)
    assert await row(pool, "scope_runs", "ts1_arrived") == ("pending", 0, None)  # the new holder's
