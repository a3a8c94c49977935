"""The periodic-task helper: intervals respected, failures survived and backed off, stop honoured.

The clock is injected (a ``wait`` that records what it was asked to wait and returns at once), so no
test sleeps or asserts wall-clock time.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator

import pytest

from trustscore.services import periodic
from trustscore.services.metrics import Metrics
from trustscore.services.periodic import Periodic


class FakeClock:
    """Records every wait; sets ``stop`` once ``limit`` waits were asked for."""

    def __init__(self, stop: asyncio.Event, limit: int) -> None:
        self.stop, self.limit = stop, limit
        self.waits: list[float] = []

    async def wait(self, stop: asyncio.Event, seconds: float) -> None:
        assert stop is self.stop
        self.waits.append(seconds)
        if len(self.waits) >= self.limit:
            stop.set()


async def test_the_interval_is_waited_between_steps_and_the_first_delay_before_the_first() -> None:
    stop = asyncio.Event()
    clock = FakeClock(stop, limit=4)
    steps: list[int] = []

    async def step() -> None:
        steps.append(len(clock.waits))

    task = Periodic("t", step, interval=7.0, first_delay=3.0, jitter=2.0)
    await periodic.run(task, stop, wait=clock.wait, draw=lambda: 0.5)
    assert clock.waits == [4.0, 7.0, 7.0, 7.0]  # first delay 3 + jitter 2 x 0.5, then the interval
    assert steps == [1, 2, 3]  # each step after a wait; none after stop


async def test_a_failing_step_does_not_end_the_loop_and_backs_off_then_recovers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    stop = asyncio.Event()
    clock = FakeClock(stop, limit=5)
    outcomes = iter(
        [ValueError("db down\nsecond line"), ValueError("db down"), RuntimeError("x"), None, None]
    )
    metrics = Metrics()

    async def step() -> None:
        exc = next(outcomes)
        if exc is not None:
            raise exc

    with caplog.at_level(logging.WARNING, logger="trustscore.services.periodic"):
        await periodic.run(
            Periodic("flaky", step, interval=1.0), stop, wait=clock.wait, failures=metrics.background_failures
        )
    assert clock.waits == [2.0, 4.0, 8.0, 1.0, 1.0]  # doubling after failures, the interval after a success
    failures = [r for r in caplog.records if r.name == "trustscore.services.periodic"]
    assert len(failures) == 3
    assert all(r.exc_info is None for r in failures)  # one line each, no traceback
    assert "flaky failed (ValueError: db down)" in failures[0].getMessage()
    assert "second line" not in failures[0].getMessage()
    assert "RuntimeError" in failures[2].getMessage()
    rendered = metrics.render().decode()
    assert 'trustscore_background_failures_total{task="flaky"} 3.0' in rendered


def test_backoff_doubles_and_is_capped() -> None:
    assert [periodic.backoff(1.0, n) for n in (1, 2, 3)] == [2.0, 4.0, 8.0]
    assert periodic.backoff(1.0, 50) == periodic.MAX_BACKOFF
    assert periodic.backoff(0.0, 1) == 2 * periodic.MIN_BACKOFF  # a zero interval still waits
    assert periodic.backoff(3600.0, 3) == 3600.0  # never more often than the interval, never more than it


async def test_stop_ends_a_long_wait_promptly() -> None:
    """With the real wait and an hour's interval, setting stop ends the task without waiting the hour."""
    stop = asyncio.Event()
    ran = asyncio.Event()

    async def step() -> None:
        ran.set()

    [task] = periodic.start([Periodic("slow", step, interval=3600.0)], stop)
    await asyncio.wait_for(ran.wait(), 30)
    stop.set()
    await asyncio.wait_for(task, 30)  # a bound for a hung test, not a timing assertion
    assert task.done() and task.exception() is None


async def test_a_stop_set_before_start_runs_nothing() -> None:
    stop = asyncio.Event()
    stop.set()
    calls: list[int] = []

    async def step() -> None:
        calls.append(1)

    await periodic.run(Periodic("never", step, interval=0.0), stop)
    assert calls == []


async def test_a_zero_interval_yields_to_other_tasks() -> None:
    stop = asyncio.Event()
    count = 0

    async def step() -> None:  # never awaits anything itself
        nonlocal count
        count += 1

    async def stopper() -> None:
        while count < 5:
            await asyncio.sleep(0)
        stop.set()

    await asyncio.wait_for(asyncio.gather(periodic.run(Periodic("busy", step, 0.0), stop), stopper()), 30)
    assert count >= 5


class FakeLeases:
    """Holds a lease only while ``free`` says so; counts the tries."""

    def __init__(self, free: list[bool]) -> None:
        self.free = iter(free)
        self.tries = 0

    async def hold(self, name: str) -> bool:
        assert name == "L"
        self.tries += 1
        return next(self.free)


async def test_a_leased_step_runs_only_while_the_lease_is_held_and_on_lease_runs_on_each_take() -> None:
    stop = asyncio.Event()
    clock = FakeClock(stop, limit=6)
    steps: list[int] = []
    takes: list[int] = []

    async def step() -> None:
        steps.append(len(clock.waits))

    async def on_lease() -> None:
        takes.append(len(clock.waits))

    task = Periodic("t", step, interval=5.0, lease="L", on_lease=on_lease)
    leases = FakeLeases([False, True, True, False, True, True])
    await periodic.run(task, stop, wait=clock.wait, leases=leases, lease_poll=0.25)
    # not held: poll again soon; held: step, then the interval; lost and taken again: on_lease again
    assert clock.waits == [0.25, 5.0, 5.0, 0.25, 5.0, 5.0]
    assert steps == [1, 2, 4, 5]
    assert takes == [1, 4]


async def test_a_leased_step_learns_when_its_lease_is_lost_part_way() -> None:
    """A step doing many units of work (queued runs) asks ``still_held`` before each unit after its first:
    within a leased task's step it asks the task's lease again; outside one it is always True."""
    stop = asyncio.Event()
    seen: list[bool] = []

    async def step() -> None:
        seen.append(await periodic.still_held())  # the lease connection is lost meanwhile
        stop.set()

    leases = FakeLeases([True, False])
    await periodic.run(
        Periodic("t", step, interval=1.0, lease="L"), stop, wait=FakeClock(stop, 9).wait, leases=leases
    )
    assert seen == [False] and leases.tries == 2
    assert await periodic.still_held()  # not in a leased step (and the step's lease did not leak here)
    stop.clear()
    unleased: list[bool] = []

    async def plain() -> None:
        unleased.append(await periodic.still_held())
        stop.set()

    await periodic.run(Periodic("u", plain, interval=1.0), stop, leases=leases)
    assert unleased == [True] and leases.tries == 2


async def test_an_aligned_task_runs_at_once_then_at_the_start_of_each_period() -> None:
    """At start an aligned task runs at once (its period may still lack its step: the previous holder
    died, the process was down at the boundary), then at the start of each period."""
    stop = asyncio.Event()
    clock = FakeClock(stop, limit=3)
    times = iter([1000.5, 1000.6, 1010.2, 1010.3, 1020.0, 1020.1])  # before and after each step
    dues: list[float] = []

    async def step(due: float) -> None:
        dues.append(due)

    task = Periodic("t", step, interval=10.0, aligned=True, jitter=5.0)
    await periodic.run(task, stop, wait=clock.wait, now=lambda: next(times), draw=lambda: 1.0)
    assert dues == [1000.5, 1010.2, 1020.0]  # the first with no wait at all (and no jitter)
    assert [round(w, 3) for w in clock.waits] == [9.401, 9.701, 9.901]  # to 1010, 1020, 1030
    assert periodic.period_of(10.0, 1019.999) == 101 and periodic.period_of(10.0, 1020.0) == 102


async def test_an_aligned_step_that_ends_in_the_next_period_is_followed_at_once() -> None:
    """A step due in period P that ends in P+1 (a slow takeover, a loaded machine) filled P; P+1's step
    runs at once, not at the start of P+2 (which would leave P+1 without one)."""
    stop = asyncio.Event()
    clock = FakeClock(stop, limit=1)
    times = iter([1009.0, 1011.0, 1011.5, 1011.6])
    dues: list[float] = []

    async def step(due: float) -> None:
        dues.append(due)

    await periodic.run(
        Periodic("t", step, interval=10.0, aligned=True), stop, wait=clock.wait, now=lambda: next(times)
    )
    assert dues == [1009.0, 1011.5]  # the second with no wait in between
    assert [round(w, 3) for w in clock.waits] == [8.401]  # then to 1020


async def hourly_snapshots(clock: FakeClock, times: Iterator[float], outcomes: list[bool]) -> list[int]:
    """Run an hourly aligned task on ``clock`` and ``times`` whose steps succeed as ``outcomes`` say;
    return the period each step was due for."""
    results = iter(outcomes)
    dues: list[float] = []

    async def step(due: float) -> None:
        dues.append(due)
        if not next(results):
            raise ValueError("db down")

    task = Periodic("snapshots", step, interval=3600.0, aligned=True)
    await periodic.run(task, clock.stop, wait=clock.wait, now=lambda: next(times))
    return [int(d // 3600) for d in dues]


async def test_a_failed_aligned_step_is_retried_for_its_own_period() -> None:
    """A failure must not cost its period, nor the next: an aligned task retries after 2 s (doubling),
    at the next period's start at the latest, and the retry still fills the failed period; the current
    one then runs at once. A period owed since before the previous one is given up."""
    stop = asyncio.Event()
    clock = FakeClock(stop, limit=6)
    times = iter(
        [
            *(3600.0, 3600.1),  # period 1 fails
            *(3602.1, 3602.2),  # and again
            *(3606.2, 3606.3),  # filled: wait for period 2
            *(7200.0, 10799.5),  # period 2 fails slowly, near its end: retried at 10800 at the latest
            *(10800.0, 10800.1),  # period 2 filled late, in period 3; period 3 at once
            *(10800.2, 10800.3),  # period 3 fails
            *(18000.5, 18000.6),  # period 5: period 3 is too old to fill now, period 4 is not
            *(18000.7, 18000.8),  # and period 5 at once
        ]
    )
    periods = await hourly_snapshots(clock, times, [False, False, True, False, True, False, True, True])
    assert periods == [1, 1, 1, 2, 2, 3, 4, 5]
    assert [round(w, 3) for w in clock.waits] == [2.0, 4.0, 3593.701, 0.501, 2.0, 3599.201]


async def test_the_period_after_a_failed_one_is_filled_when_the_failure_ends_in_the_period_after_it() -> None:
    """(Found by review.) Period 1 fails through the end of period 2, so period 2's step never ran; the
    failure ends at period 3's start: period 1 is given up, period 2 is filled late, then period 3."""
    stop = asyncio.Event()
    clock = FakeClock(stop, limit=3)
    times = iter(
        [
            *(3600.0, 3600.1),  # period 1 fails
            *(7200.0, 10799.9),  # retried for period 1 in period 2: fails until period 2's end
            *(10800.0, 10800.1),  # period 3: period 2 filled
            *(10800.2, 10800.3),  # and period 3 at once
        ]
    )
    periods = await hourly_snapshots(clock, times, [False, False, True, True])
    assert periods == [1, 1, 2, 3]


async def test_a_failed_run_whose_claim_was_overtaken_says_nothing_was_changed() -> None:
    async def overtaken(*_: object) -> bool:
        return False

    async def changed(*_: object) -> bool:
        return True

    assert await periodic.settle_failed_run(3, 3, 60.0, overtaken, overtaken) == (
        "not closed: the attempt was overtaken by a later claim"
    )
    assert await periodic.settle_failed_run(1, 3, 60.0, overtaken, overtaken) == (
        "not postponed: the attempt was overtaken by a later claim"
    )
    assert await periodic.settle_failed_run(3, 3, 60.0, changed, changed) == "closed after 3 attempts"
    assert await periodic.settle_failed_run(2, 3, 60.0, changed, changed) == "due again in 240 s"
