"""The grading queue: one report per signer, first come first served, bounded waits, no leaked slots."""

from __future__ import annotations

import asyncio

import pytest

from trustscore.errors import Busy, RateLimited
from trustscore.services.grading_queue import GradingQueue, QueueLimits


async def hold(queue: GradingQueue, signer: str, release: asyncio.Event, log: list[str]) -> None:
    async with queue.slot(signer):
        log.append(signer)
        await release.wait()


async def test_a_signer_gets_one_report_in_grading_at_a_time() -> None:
    queue = GradingQueue(QueueLimits(slots=4))
    release = asyncio.Event()
    first = asyncio.create_task(hold(queue, "a", release, []))
    await asyncio.sleep(0)
    with pytest.raises(RateLimited, match="one report per signer") as exc:
        async with queue.slot("a"):
            pass
    assert exc.value.extra["retry_after"] >= 1
    async with queue.slot("b"):  # another signer is not held up
        pass
    release.set()
    await first
    async with queue.slot("a"):  # and once done, the signer may submit again
        pass


async def test_waiting_signers_are_served_in_arrival_order() -> None:
    queue = GradingQueue(QueueLimits(slots=1))
    gates = {s: asyncio.Event() for s in "abcd"}
    log: list[str] = []
    tasks = []
    for s in "abcd":
        tasks.append(asyncio.create_task(hold(queue, s, gates[s], log)))
        await asyncio.sleep(0)
    assert log == ["a"] and queue.waiting == 3
    for s in "abcd":
        gates[s].set()
        await asyncio.sleep(0.01)
    await asyncio.gather(*tasks)
    assert log == ["a", "b", "c", "d"]


async def test_the_wait_is_bounded_and_says_why() -> None:
    queue = GradingQueue(QueueLimits(slots=1, max_wait=0.1))
    release = asyncio.Event()
    first = asyncio.create_task(hold(queue, "a", release, []))
    await asyncio.sleep(0)
    with pytest.raises(Busy, match=r"waited 0\.1 s for a grading slot") as exc:
        async with queue.slot("b"):
            pass
    assert exc.value.extra["retry_after"] >= 1 and queue.waiting == 0
    release.set()
    await first


async def test_a_full_queue_refuses_at_once() -> None:
    queue = GradingQueue(QueueLimits(slots=1, max_waiting=1))
    release = asyncio.Event()
    tasks = [asyncio.create_task(hold(queue, s, release, [])) for s in "ab"]
    await asyncio.sleep(0)
    with pytest.raises(Busy, match="1 reports are already waiting"):
        async with queue.slot("c"):
            pass
    release.set()
    await asyncio.gather(*tasks)


async def test_a_cancelled_waiter_leaks_no_slot() -> None:
    queue = GradingQueue(QueueLimits(slots=1))
    release = asyncio.Event()
    first = asyncio.create_task(hold(queue, "a", release, []))
    await asyncio.sleep(0)
    waiter = asyncio.create_task(hold(queue, "b", asyncio.Event(), []))
    await asyncio.sleep(0)
    waiter.cancel()
    release.set()
    await first
    with pytest.raises(asyncio.CancelledError):
        await waiter
    log: list[str] = []
    done = asyncio.Event()
    done.set()
    await asyncio.wait_for(hold(queue, "c", done, log), 1)
    assert log == ["c"] and queue.waiting == 0


async def test_sybil_signers_from_one_address_get_half_the_slots_at_most() -> None:
    """Review of #17: the one-report-per-signer rule was the only fairness, and keys are free: one client
    with four fresh keys held all four slots (and with more, filled the waiting line) while honest
    reports from elsewhere waited and got 503. A client address holds at most half the slots."""
    queue = GradingQueue(QueueLimits(slots=4))
    assert queue.per_address == 2
    release = asyncio.Event()
    held = [asyncio.create_task(hold_from(queue, f"sybil-{n}", "203.0.113.9", release)) for n in (1, 2)]
    await asyncio.sleep(0)
    for n in range(3, 6):
        with pytest.raises(RateLimited, match="per client address") as exc:
            async with queue.slot(f"sybil-{n}", "203.0.113.9"):
                pass
        assert exc.value.extra["retry_after"] >= 1
    async with queue.slot("honest", "198.51.100.7"):  # another client is graded at once
        assert queue.waiting == 0
    release.set()
    await asyncio.gather(*held)
    async with queue.slot("sybil-3", "203.0.113.9"):  # once done, that address may submit again
        pass


async def hold_from(queue: GradingQueue, signer: str, address: str, release: asyncio.Event) -> None:
    async with queue.slot(signer, address):
        await release.wait()
