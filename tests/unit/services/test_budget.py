"""A budget of work in flight (services/budget.py): weights held together up to the limit, first come
first served, a bounded wait that ends in 503 with Retry-After, and nothing left held by a caller that
gave up or failed."""

from __future__ import annotations

import asyncio

import pytest

from trustscore.errors import Busy
from trustscore.services.budget import WorkBudget


async def holder(budget: WorkBudget, weight: int, started: list[int], release: asyncio.Event) -> None:
    async with budget.hold(weight):
        started.append(weight)
        await release.wait()


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_weights_run_together_up_to_the_limit_then_wait() -> None:
    budget = WorkBudget(10, 5.0, "entries")
    started: list[int] = []
    release = asyncio.Event()
    tasks = [asyncio.create_task(holder(budget, w, started, release)) for w in (4, 6, 1)]
    await settle()
    assert started == [4, 6] and budget.used == 10  # 1 more would pass the limit: it waits
    release.set()
    await asyncio.gather(*tasks)
    assert started == [4, 6, 1] and budget.used == 0


async def test_first_come_first_served_a_light_caller_does_not_pass_a_heavy_one() -> None:
    budget = WorkBudget(10, 5.0, "entries")
    started: list[int] = []
    first, second = asyncio.Event(), asyncio.Event()
    a = asyncio.create_task(holder(budget, 8, started, first))
    await settle()
    heavy = asyncio.create_task(holder(budget, 5, started, second))  # waits for the 8
    await settle()
    light = asyncio.create_task(holder(budget, 1, started, second))  # would fit, but comes after the 5
    await settle()
    assert started == [8]
    first.set()
    await settle()
    assert started == [8, 5, 1]
    second.set()
    await asyncio.gather(a, heavy, light)


async def test_a_weight_above_the_limit_holds_all_of_it() -> None:
    budget = WorkBudget(10, 5.0, "entries")
    async with budget.hold(1_000_000):
        assert budget.used == 10
    assert budget.used == 0


async def test_a_wait_past_the_bound_is_refused_and_leaves_nothing_behind() -> None:
    budget = WorkBudget(10, 0.05, "bundle entries")
    release = asyncio.Event()
    started: list[int] = []
    task = asyncio.create_task(holder(budget, 10, started, release))
    await settle()
    with pytest.raises(Busy) as refused:
        async with budget.hold(1):
            raise AssertionError("the budget was full")
    assert refused.value.status == 503 and refused.value.extra["retry_after"] >= 1
    assert "10 bundle entries are in work" in refused.value.message
    release.set()
    await task
    assert budget.used == 0
    async with budget.hold(10):  # the refused caller is not in the queue any more
        assert budget.used == 10


async def test_a_caller_that_leaves_while_waiting_lets_the_next_in() -> None:
    budget = WorkBudget(10, 5.0, "entries")
    started: list[int] = []
    first, rest = asyncio.Event(), asyncio.Event()
    a = asyncio.create_task(holder(budget, 10, started, first))
    await settle()
    leaving = asyncio.create_task(holder(budget, 10, started, rest))
    after = asyncio.create_task(holder(budget, 3, started, rest))
    await settle()
    leaving.cancel()
    await settle()
    first.set()
    await settle()
    assert started == [10, 3]  # the one that left never ran, and did not block the next
    rest.set()
    await asyncio.gather(a, after)
    assert budget.used == 0


async def test_a_failing_block_gives_its_weight_back() -> None:
    budget = WorkBudget(10, 5.0, "entries")
    with pytest.raises(RuntimeError):
        async with budget.hold(7):
            raise RuntimeError("the making failed")
    assert budget.used == 0


def test_a_budget_needs_room_and_a_wait() -> None:
    with pytest.raises(ValueError):
        WorkBudget(0, 1.0, "entries")
    with pytest.raises(ValueError):
        WorkBudget(1, -1.0, "entries")


async def test_a_head_that_leaves_lets_a_fitting_next_in_at_once() -> None:
    """(From a review: without the notice to the next in line this waited for the next release.)"""
    budget = WorkBudget(10, 5.0, "entries")
    started: list[int] = []
    first, rest = asyncio.Event(), asyncio.Event()
    a = asyncio.create_task(holder(budget, 5, started, first))
    await settle()
    head = asyncio.create_task(holder(budget, 10, started, rest))  # does not fit while 5 are held
    after = asyncio.create_task(holder(budget, 3, started, rest))  # fits, but is behind the head
    await settle()
    head.cancel()
    await settle()
    assert started == [5, 3]  # 5 + 3 <= 10: in as soon as the head left
    first.set()
    rest.set()
    await asyncio.gather(a, after)
