"""Coalesced lookups: callers that arrive during a lookup share the next one, each gets only its keys,
no answer predates its question, and a failure reaches exactly the callers of the failed lookup."""

from __future__ import annotations

import asyncio

import pytest

from trustscore.services.coalesce import Coalescer


class Table:
    """A lookup whose calls block until released, recording the keys of each call."""

    def __init__(self) -> None:
        self.rows: dict[str, int] = {}
        self.calls: list[list[str]] = []
        self.gate = asyncio.Event()
        self.fail: Exception | None = None  # raised by the next lookup only

    async def fetch(self, keys: list[str]) -> dict[str, int]:
        self.calls.append(sorted(keys))
        rows = dict(self.rows)  # what the lookup sees is what was there when it started
        fail, self.fail = self.fail, None  # a failure fails one lookup
        await self.gate.wait()
        if fail is not None:
            raise fail
        return {k: rows[k] for k in keys if k in rows}


async def settle() -> None:
    """Let every ready task run until it blocks."""
    for _ in range(5):
        await asyncio.sleep(0)


async def test_callers_waiting_meanwhile_share_one_lookup_and_get_their_own_keys() -> None:
    table = Table()
    table.rows = {"a": 1, "b": 2, "c": 3}
    lookups = Coalescer[str, int](table.fetch)
    first = asyncio.create_task(lookups.get(["a"]))
    await settle()
    later = [asyncio.create_task(lookups.get(keys)) for keys in (["b"], ["c", "zz"], ["a", "b"])]
    await settle()
    table.gate.set()
    assert await first == {"a": 1}
    assert [await t for t in later] == [{"b": 2}, {"c": 3}, {"a": 1, "b": 2}]
    assert table.calls == [["a"], ["a", "b", "c", "zz"]]  # four callers, two lookups


async def test_no_answer_is_older_than_its_question() -> None:
    table = Table()
    lookups = Coalescer[str, int](table.fetch)
    first = asyncio.create_task(lookups.get(["k"]))
    await settle()  # the first lookup is running: it cannot see what is written next
    table.rows["k"] = 7
    second = asyncio.create_task(lookups.get(["k"]))
    table.gate.set()
    assert await first == {}
    assert await second == {"k": 7}


async def test_a_failed_lookup_fails_its_callers_only() -> None:
    table = Table()
    table.rows = {"a": 1}
    lookups = Coalescer[str, int](table.fetch)
    table.fail = RuntimeError("database gone")
    first = asyncio.create_task(lookups.get(["a"]))
    await settle()
    second = asyncio.create_task(lookups.get(["a"]))
    await settle()
    table.gate.set()
    with pytest.raises(RuntimeError, match="database gone"):
        await first
    assert await second == {"a": 1}


async def test_a_big_crowd_is_split_into_bounded_lookups() -> None:
    table = Table()
    table.gate.set()
    blocker = asyncio.Event()

    async def slow(keys: list[str]) -> dict[str, int]:
        await blocker.wait()
        return await table.fetch(keys)

    lookups = Coalescer[str, int](slow, max_keys=3)
    tasks = [asyncio.create_task(lookups.get([str(i)])) for i in range(7)]
    await settle()
    blocker.set()
    await asyncio.gather(*tasks)
    assert [len(c) for c in table.calls] == [3, 3, 1]


async def test_no_keys_no_lookup() -> None:
    table = Table()
    assert await Coalescer[str, int](table.fetch).get([]) == {}
    assert table.calls == []


async def test_a_key_the_database_refuses_fails_only_the_caller_who_sent_it() -> None:
    """A key the lookup itself refuses (asyncpg cannot encode a NUL character, say) must not fail the
    honest callers that shared its lookup: the shared lookup is retried caller by caller."""
    rows = {"a": 1, "b": 2}
    calls: list[list[str]] = []
    gate = asyncio.Event()

    async def fetch(keys: list[str]) -> dict[str, int]:
        calls.append(sorted(keys))
        await gate.wait()
        if any("\x00" in k for k in keys):
            raise ValueError("invalid byte sequence: 0x00")
        return {k: rows[k] for k in keys if k in rows}

    lookups = Coalescer[str, int](fetch)
    first = asyncio.create_task(lookups.get(["a"]))
    await settle()  # the first lookup runs; the next three share one
    honest = asyncio.create_task(lookups.get(["a"]))
    evil = asyncio.create_task(lookups.get(["x\x00y"]))
    other = asyncio.create_task(lookups.get(["b"]))
    await settle()
    gate.set()
    assert await first == {"a": 1}
    assert await honest == {"a": 1} and await other == {"b": 2}
    with pytest.raises(ValueError, match="0x00"):
        await evil
    assert calls[1] == ["a", "b", "x\x00y"] and calls[2:] == [["a"], ["x\x00y"], ["b"]]


async def test_when_every_lookup_fails_the_callers_are_retried_at_once() -> None:
    """The database down: a shared lookup fails, and so does each caller's own retry. The retries run
    together, so the last caller waits for one more failure, not for every other caller's (found by
    review: one after another, a lookup that fails after a 60 s connect timeout made the twentieth
    report wait twenty minutes)."""
    running, most = 0, 0
    gate = asyncio.Event()

    async def fetch(keys: list[str]) -> dict[str, int]:
        nonlocal running, most
        running += 1
        most = max(most, running)
        try:
            await gate.wait()
            await asyncio.sleep(0.01)  # the failure takes a while to come
            raise ConnectionError("cannot connect to PostgreSQL")
        finally:
            running -= 1

    lookups = Coalescer[str, int](fetch)
    first = asyncio.create_task(lookups.get(["a"]))
    await settle()
    waiting = [asyncio.create_task(lookups.get([f"k{i}"])) for i in range(20)]
    await settle()
    gate.set()
    for task in [first, *waiting]:
        with pytest.raises(ConnectionError):
            await task
    assert most == 20  # the twenty retries were in flight together
