"""One helper for the server's background work: run a step every ``interval`` seconds until stopped.

Every background loop (integrator, projector, rating refresh, snapshots, re-verification, sitting
expiry, scope runs) is a :class:`Periodic` run by :func:`run`: an optional first delay (with jitter, so
several processes do not wake together), the step, then a wait that ends early when ``stop`` is set.
A failing step never ends the loop: it logs one line naming the exception's class (no traceback: the
same failure would print one per interval), counts the failure in a metric and waits longer after each
failure in a row (doubling, capped), back to ``interval`` after a success. The clock is injected
(``wait``, ``jitter``) so tests drive it without sleeping.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from prometheus_client import Counter

log = logging.getLogger(__name__)

#: The longest wait after failures in a row (unless the interval itself is longer).
MAX_BACKOFF = 60.0
#: The shortest wait after a failure, so that a zero interval does not spin on a failing step.
MIN_BACKOFF = 0.1

Wait = Callable[[asyncio.Event, float], Awaitable[None]]


@dataclass(frozen=True)
class Periodic:
    """A named step run every ``interval`` seconds; ``first_delay`` (plus up to ``jitter`` seconds drawn
    at start) before the first run."""

    name: str
    step: Callable[[], Awaitable[object]]
    interval: float
    first_delay: float = 0.0
    jitter: float = 0.0


async def wait_or_stop(stop: asyncio.Event, seconds: float) -> None:
    """Sleep ``seconds``, returning as soon as ``stop`` is set."""
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(stop.wait(), seconds)


def backoff(interval: float, failures: int) -> float:
    """The wait after ``failures`` (>= 1) failed steps in a row: twice the interval per failure, capped."""
    base = max(interval, MIN_BACKOFF)
    return min(base * 2.0 ** min(failures, 32), max(MAX_BACKOFF, interval))


def _line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:300]}" if text else type(exc).__name__


async def run(
    task: Periodic,
    stop: asyncio.Event,
    *,
    failures: Counter | None = None,
    wait: Wait = wait_or_stop,
    draw: Callable[[], float] = random.random,
) -> None:
    """Run ``task`` until ``stop`` is set (checked before every step and after every wait)."""
    delay = task.first_delay + task.jitter * draw()
    in_a_row = 0
    while not stop.is_set():
        if delay > 0:
            await wait(stop, delay)
            if stop.is_set():
                return
        else:
            await asyncio.sleep(0)  # a zero interval still lets other tasks run
        try:
            await task.step()
        except Exception as exc:
            in_a_row += 1
            delay = backoff(task.interval, in_a_row)
            if failures is not None:
                failures.labels(task=task.name).inc()
            log.warning("%s failed (%s); retrying in %.1f s", task.name, _line(exc), delay)
        else:
            in_a_row = 0
            delay = task.interval


def start(
    tasks: list[Periodic], stop: asyncio.Event, failures: Counter | None = None
) -> list[asyncio.Task[None]]:
    """Start every task in the running loop; await the returned tasks after setting ``stop``."""
    return [asyncio.create_task(run(t, stop, failures=failures), name=t.name) for t in tasks]


__all__ = ["MAX_BACKOFF", "Periodic", "backoff", "run", "start", "wait_or_stop"]
