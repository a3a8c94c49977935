"""One helper for the server's background work: run a step every ``interval`` seconds until stopped.

Every background loop (integrator, projector, rating refresh, snapshots, re-verification, sitting
expiry, scope runs) is a :class:`Periodic` run by :func:`run`: an optional first delay (with jitter, so
several processes do not wake together), the step, then a wait that ends early when ``stop`` is set.
A failing step never ends the loop: it logs one line naming the exception's class (no traceback: the
same failure would print one per interval), counts the failure in a metric and waits longer after each
failure in a row (doubling, capped), back to ``interval`` after a success. The clock is injected
(``wait``, ``jitter``, ``now``) so tests drive it without sleeping.

A singleton job names a ``lease`` (store/leases.py): when several processes run it on one database, a
step runs only in the process holding the lease; the others try to take it every ``lease_poll``
seconds and take over when its holder dies. Jobs may share a lease (the projector, rating refresh and
snapshots share "ratings": they read one process's in-memory ratings). A job whose work is counted per
period (snapshots) is ``aligned``: it wakes at wall-clock multiples of its interval, so that whichever
process holds the lease, each period's step runs in that period (the step itself makes a second run in
the same period a no-op; docs/operations.md, "Roles and leases"). An aligned step is given ``due``, a
time in the period it fills. So that no period is left without its step while some process could have
run it, an aligned job runs at once when it starts (the process may start, or take the lease, in a
period whose step never ran); a failed step keeps its ``due`` and is retried after 2 s, doubling, and at
the next period's start at the latest, still for its own period (which may be filled late, until the
end of the period after it: an owed period older than that is given up for the previous one); and after
a step that filled an earlier period than the current one (it failed before, or outlasted its period),
the current period's step runs at once.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import random
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol, cast

from prometheus_client import Counter

log = logging.getLogger(__name__)

#: The longest wait after failures in a row (unless the interval itself is longer).
MAX_BACKOFF = 60.0
#: The shortest wait after a failure, so that a zero interval does not spin on a failing step.
MIN_BACKOFF = 0.1

Wait = Callable[[asyncio.Event, float], Awaitable[None]]
Step = Callable[[], Awaitable[object]]
#: An aligned task's step: given ``due``, a time (seconds since the epoch) in the period it fills.
DueStep = Callable[[float], Awaitable[object]]

#: Seconds a process without a job's lease waits before trying to take it again (default).
LEASE_POLL = 1.0


class Leases(Protocol):
    """Leases on singleton jobs (store/leases.py): ``hold`` says whether this process holds ``name``
    now, taking it when it is free."""

    async def hold(self, name: str) -> bool: ...


@dataclass(frozen=True)
class Periodic:
    """A named step run every ``interval`` seconds; ``first_delay`` (plus up to ``jitter`` seconds drawn
    at start) before the first run."""

    name: str
    step: Step | DueStep  # a DueStep when ``aligned``
    interval: float
    first_delay: float = 0.0
    jitter: float = 0.0
    lease: str | None = None  # run only while holding this lease (None: in every process)
    aligned: bool = False  # wake at multiples of ``interval`` since the epoch, not ``interval`` after a step
    on_lease: Callable[[], Awaitable[object]] | None = None  # run once each time the lease is taken


#: The lease of the leased task whose step is running in this asyncio task, and the leases it is held by
#: (set by :func:`run` for the task it runs; each task started by :func:`start` has a context of its own).
_LEASE: contextvars.ContextVar[tuple[Leases, str] | None] = contextvars.ContextVar(
    "trustscore_periodic_lease", default=None
)


async def still_held() -> bool:
    """Within a leased task's step: whether this process still holds the task's lease (False when the
    lease connection is lost: store/leases.py; a lease found free is taken again, as at the next step).
    A step that does many units of work (queued runs) asks before each unit after its first, so that a
    process that lost the lease part-way stops, where the process that took it over goes on. Outside a
    leased task's step: True. The answer comes from a context variable, which an asyncio task created
    within a step copies and keeps: a long-lived helper task started there (a coalescer, the log's
    committer) must not ask."""
    current = _LEASE.get()
    return True if current is None else await current[0].hold(current[1])


def period_of(interval: float, at: float) -> int:
    """The period that the wall-clock time ``at`` (seconds since the epoch) falls in."""
    return int(at // interval)


def until_next_period(interval: float, at: float) -> float:
    """Seconds from ``at`` to the start of the next period (a little after, so ``period_of`` moves on)."""
    return (period_of(interval, at) + 1) * interval - at + 1e-3


#: Half the first wait after an aligned step failed (the wait doubles after each failure in a row).
ALIGNED_RETRY = 1.0


async def wait_or_stop(stop: asyncio.Event, seconds: float) -> None:
    """Sleep ``seconds``, returning as soon as ``stop`` is set."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)


def backoff(interval: float, failures: int) -> float:
    """The wait after ``failures`` (>= 1) failed steps in a row: twice the interval per failure, capped."""
    base = max(interval, MIN_BACKOFF)
    return min(base * 2.0 ** min(failures, 32), max(MAX_BACKOFF, interval))


def retry_delay(base: float, attempts: int) -> float:
    """Seconds before a failed queued run (scope runs, re-verification) is due again after its
    ``attempts``-th attempt (>= 1): ``base``, then four times longer per attempt, at most six hours."""
    return min(base * 4.0 ** (attempts - 1), 6 * 3600.0)


def claim_hold(deadline_s: float) -> float:
    """Seconds a claimed queued run (scope runs, re-verification) is its claimer's alone: its deadline,
    then half as long again (at least 10 s) to grade and log what it found."""
    return deadline_s + max(10.0, deadline_s / 2)


async def settle_failed_run(
    attempts: int,
    max_attempts: int,
    retry_s: float,
    close: Callable[[], Awaitable[object]],
    retry: Callable[[float], Awaitable[object]],
) -> str:
    """After a queued run's (scope runs, re-verification) ``attempts``-th attempt failed: ``close`` it if
    that was its last, else ``retry`` it after :func:`retry_delay`; return what was done, for its log line.
    ``close`` or ``retry`` returning False means the claim was overtaken (its hold had passed and another
    worker claimed the run): nothing was changed."""
    if attempts >= max_attempts:
        if await close() is False:
            return "not closed: the attempt was overtaken by a later claim"
        return f"closed after {attempts} attempts"
    delay = retry_delay(retry_s, attempts)
    if await retry(delay) is False:
        return "not postponed: the attempt was overtaken by a later claim"
    return f"due again in {delay:.0f} s"


def describe(exc: BaseException) -> str:
    """One line naming ``exc``: its class and the first line of its message (for a log line)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300]}" if text else type(exc).__name__


async def run(
    task: Periodic,
    stop: asyncio.Event,
    *,
    failures: Counter | None = None,
    wait: Wait = wait_or_stop,
    draw: Callable[[], float] = random.random,
    leases: Leases | None = None,
    lease_poll: float = LEASE_POLL,
    now: Callable[[], float] = time.time,
) -> None:
    """Run ``task`` until ``stop`` is set (checked before every step and after every wait); a task with
    a lease runs its step only while ``leases`` holds it (always, when ``leases`` is None), and its step
    may ask :func:`still_held`."""
    token = _LEASE.set(None if task.lease is None or leases is None else (leases, task.lease))
    try:
        await _run(task, stop, failures, wait, draw, leases, lease_poll, now)
    finally:
        _LEASE.reset(token)


async def _run(
    task: Periodic,
    stop: asyncio.Event,
    failures: Counter | None,
    wait: Wait,
    draw: Callable[[], float],
    leases: Leases | None,
    lease_poll: float,
    now: Callable[[], float],
) -> None:
    # An aligned task runs at once: the current period may still lack its step.
    delay = 0.0 if task.aligned else task.first_delay + task.jitter * draw()
    in_a_row = 0
    holding = False
    due: float | None = None  # aligned: a time in the oldest period this process still owes a step
    while not stop.is_set():
        if delay > 0:
            await wait(stop, delay)
            if stop.is_set():
                return
        else:
            await asyncio.sleep(0)  # a zero interval still lets other tasks run
        try:
            if task.lease is not None and leases is not None:
                if not await leases.hold(task.lease):
                    holding = False
                    due = None  # the holder owes the periods now
                    delay = min(lease_poll, task.interval)
                    continue
                if not holding and task.on_lease is not None:
                    await task.on_lease()  # if it fails, it runs again before the next step
                holding = True
            if task.aligned:
                at = now()
                if due is None:
                    due = at
                elif period_of(task.interval, at) > period_of(task.interval, due) + 1:
                    due = at - task.interval  # owed too long ago: the previous period may still be filled
                await cast(DueStep, task.step)(due)
            else:
                await cast(Step, task.step)()
        except Exception as exc:
            in_a_row += 1
            if task.aligned:  # its period is retried soon, and at the next period's start at the latest
                delay = min(backoff(ALIGNED_RETRY, in_a_row), until_next_period(task.interval, now()))
            else:
                delay = backoff(task.interval, in_a_row)
            if failures is not None:
                failures.labels(task=task.name).inc()
            log.warning("%s failed (%s); retrying in %.1f s", task.name, describe(exc), delay)
        else:
            in_a_row = 0
            if task.aligned:
                assert due is not None
                filled, at = period_of(task.interval, due), now()
                due = None
                # At once if the step filled an earlier period than the current one; else at the next.
                delay = 0.0 if period_of(task.interval, at) > filled else until_next_period(task.interval, at)
            else:
                delay = task.interval


def start(
    tasks: list[Periodic],
    stop: asyncio.Event,
    failures: Counter | None = None,
    leases: Leases | None = None,
    lease_poll: float = LEASE_POLL,
) -> list[asyncio.Task[None]]:
    """Start every task in the running loop; await the returned tasks after setting ``stop``."""
    return [
        asyncio.create_task(
            run(t, stop, failures=failures, leases=leases, lease_poll=lease_poll), name=t.name
        )
        for t in tasks
    ]


__all__ = [
    "LEASE_POLL",
    "MAX_BACKOFF",
    "Leases",
    "Periodic",
    "backoff",
    "claim_hold",
    "describe",
    "period_of",
    "retry_delay",
    "run",
    "settle_failed_run",
    "start",
    "still_held",
    "until_next_period",
    "wait_or_stop",
]
