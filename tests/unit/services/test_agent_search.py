"""The agent search's name order is made in a thread: searches answer from the order made before while
the next is made (only the first is waited for), and a making that fails is logged and tried again later,
never failing a search."""

from __future__ import annotations

import asyncio
import hashlib
import logging
import threading
from typing import Any

import pytest

from trustscore.names import NameIndex, NameOrder
from trustscore.services import agent_search
from trustscore.services.agent_search import AgentSearch

REAL_OF = NameOrder.of


def _id(n: int) -> str:
    return "ts1_" + hashlib.sha1(str(n).encode()).hexdigest()


class _Directory:
    """The directory's read, over an index the test feeds."""

    def __init__(self) -> None:
        self.index = NameIndex()

    async def read(self) -> NameIndex:
        return self.index

    async def warm(self, stop: asyncio.Event) -> NameIndex | None:
        return None if stop.is_set() else self.index


def _search(directory: _Directory, reorder: int) -> AgentSearch:
    return AgentSearch(directory, reorder)  # type: ignore[arg-type]


async def test_searches_answer_from_the_order_made_before_while_the_next_is_made(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Before, every search waited for the making once enough agents changed: at 10^6 agents ~6 s each,
    and anyone who registers 2,049 agents can start one every few seconds."""
    directory = _Directory()
    for n in range(10):
        directory.index.add(n, _id(n), f"Scout {n}")
    search = _search(directory, reorder=3)
    assert [f.name for f in await search.search("scout 1", 5)] == ["Scout 1"]  # the first: waited for
    assert directory.index.ordered and directory.index.unordered == 0
    release, started = threading.Event(), threading.Event()
    real = NameOrder.of

    def blocked(agents: Any) -> NameOrder:
        started.set()
        release.wait(10)
        return real(agents)

    monkeypatch.setattr(NameOrder, "of", blocked)
    for n in range(10, 15):
        directory.index.add(n, _id(n), f"Scout {n}")
    directory.index.add(99, _id(0), "Renamed")
    found = await asyncio.wait_for(search.search("scout 1", 50), 5)  # not held by the making
    assert [f.name for f in found] == ["Scout 1", "Scout 10", "Scout 11", "Scout 12", "Scout 13", "Scout 14"]
    assert [f.id for f in await search.search("renamed", 5)] == [_id(0)]
    assert await asyncio.to_thread(started.wait, 5) and directory.index.unordered == 6
    # Past WAIT_BEYOND times as many changed agents as ``reorder``, a search waits for the making.
    for n in range(15, 15 + agent_search.WAIT_BEYOND * 3):
        directory.index.add(n, _id(n), f"Scout {n}")
    waiting = asyncio.ensure_future(search.search("scout 2", 50))
    done, _ = await asyncio.wait([waiting], timeout=0.3)
    assert not done  # held by the making, blocked in its thread
    release.set()
    assert [f.name for f in await waiting][:2] == ["Scout 2", "Scout 20"]
    assert directory.index.unordered == agent_search.WAIT_BEYOND * 3  # those added while it was made
    for _ in range(200):  # the next search starts the next making (and need not wait for it)
        await search.search("scout 1", 50)
        if directory.index.unordered == 0:
            break
        await asyncio.sleep(0.01)
    assert directory.index.unordered == 0  # the making was installed
    expected = sorted((f"Scout {n}" for n in range(1, 27) if str(n).startswith("1")), key=str.casefold)
    assert [f.name for f in await search.search("scout 1", 50)] == expected


async def test_a_making_that_fails_is_logged_and_not_tried_again_at_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    directory = _Directory()
    for n in range(8):
        directory.index.add(n, _id(n), f"Ledger {n}")
    calls = [0]

    def failing(agents: Any) -> NameOrder:
        calls[0] += 1
        raise MemoryError

    monkeypatch.setattr(NameOrder, "of", failing)
    search = _search(directory, reorder=3)
    with caplog.at_level(logging.ERROR, logger=agent_search.__name__):
        first = await search.search("ledger", 3)  # no order: answered by a scan of every agent
        again = await search.search("ledger 7", 3)
    assert [f.name for f in first] == ["Ledger 0", "Ledger 1", "Ledger 2"]
    assert [f.name for f in again] == ["Ledger 7"]
    assert calls == [1] and "could not be made" in caplog.text
    search._retry_at = 0.0  # the retry delay passed
    monkeypatch.setattr(NameOrder, "of", REAL_OF)
    await search.search("ledger", 3)
    assert directory.index.ordered


async def test_the_warm_up_makes_the_order_a_search_would_make(monkeypatch: pytest.MonkeyPatch) -> None:
    """A serving process's background step makes the order where a search would start making it, so the
    first search after a start waits for none; past a stop, or with too few agents changed, it makes none."""
    directory = _Directory()
    for n in range(3):
        directory.index.add(n, _id(n), f"Broker {n}")
    search = _search(directory, reorder=3)
    await search.warm(asyncio.Event())
    assert not directory.index.ordered  # 3 agents unordered: a search scans them (no making due)
    directory.index.add(3, _id(3), "Broker 3")
    stop = asyncio.Event()
    stop.set()
    await search.warm(stop)
    assert not directory.index.ordered  # stopped: nothing made
    await search.warm(asyncio.Event())
    assert directory.index.ordered and directory.index.unordered == 0

    def no_making(agents: Any) -> NameOrder:
        raise AssertionError("a search made the order again")

    monkeypatch.setattr(NameOrder, "of", no_making)
    assert [f.name for f in await search.search("broker 3", 5)] == ["Broker 3"]
