"""One making per key: callers arriving while it runs share it, one that leaves stops nobody, its error
reaches every caller and is never left unretrieved, and it is forgotten when it ends."""

from __future__ import annotations

import asyncio
import gc

import pytest

from trustscore.services.single_flight import SingleFlight


class Making:
    """A making that blocks until released, counting its runs."""

    def __init__(self) -> None:
        self.runs = 0
        self.gate = asyncio.Event()
        self.fail: Exception | None = None

    async def __call__(self) -> int:
        self.runs += 1
        run = self.runs
        await self.gate.wait()
        if self.fail is not None:
            raise self.fail
        return run


async def settle() -> None:
    for _ in range(5):
        await asyncio.sleep(0)


async def test_callers_arriving_together_share_one_making() -> None:
    flights, making = SingleFlight[str, int](), Making()
    callers = [asyncio.create_task(flights.get("k", making)) for _ in range(8)]
    await settle()
    assert flights.under_way("k") and making.runs == 1
    making.gate.set()
    assert await asyncio.gather(*callers) == [1] * 8
    assert not flights.under_way("k")
    assert await flights.get("k", making) == 2  # ended: the next caller makes it again


async def test_a_caller_that_leaves_stops_nobody() -> None:
    flights, making = SingleFlight[str, int](), Making()
    leaving = asyncio.create_task(flights.get("k", making))
    staying = asyncio.create_task(flights.get("k", making))
    await settle()
    leaving.cancel()
    await settle()
    assert leaving.cancelled() and flights.under_way("k")
    making.gate.set()
    assert await staying == 1 and making.runs == 1


async def test_an_error_reaches_every_caller_and_is_retrieved_when_all_left(
    caplog: pytest.LogCaptureFixture,
) -> None:
    flights, making = SingleFlight[str, int](), Making()
    making.fail = RuntimeError("no database")
    callers = [asyncio.create_task(flights.get("k", making)) for _ in range(3)]
    await settle()
    making.gate.set()
    for caller in callers:
        with pytest.raises(RuntimeError, match="no database"):
            await caller
    # Every caller gone before the making failed: nobody reads its error but the flight itself.
    making.gate.clear()
    leaving = asyncio.create_task(flights.get("k", making))
    await settle()
    leaving.cancel()
    await settle()
    making.gate.set()
    await settle()
    gc.collect()
    assert not flights.under_way("k")
    assert "never retrieved" not in caplog.text


async def test_another_stamp_starts_its_own_and_the_older_one_does_not_forget_it() -> None:
    flights, older, newer = SingleFlight[str, int](), Making(), Making()
    first = asyncio.create_task(flights.get("k", older, stamp=1))
    await settle()
    second = asyncio.create_task(flights.get("k", newer, stamp=2))
    await settle()
    assert older.runs == newer.runs == 1
    assert flights.under_way("k", 2) and not flights.under_way("k", 1)
    older.gate.set()
    assert await first == 1
    assert flights.under_way("k", 2)  # the older one ending forgets only itself
    joined = asyncio.create_task(flights.get("k", newer, stamp=2))
    newer.gate.set()
    assert await second == await joined == 1 and newer.runs == 1


async def test_a_making_cancelled_before_it_ran_is_forgotten() -> None:
    flights, making = SingleFlight[str, int](), Making()
    flights.start("k", making).cancel()
    await settle()
    assert not flights.under_way("k")
    making.gate.set()
    assert await flights.get("k", making) == 1
