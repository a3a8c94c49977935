"""The registered agents, kept in memory: one index of ids, display names and name skeletons per process.

The agent list, the leaderboards, the pages' names, the search and the look-alike warnings all read it.
Each read first reads the agent cards logged since the previous read (one snapshot, a page of each card
kind per query in index order, only the name parsed: each card once per process). Before 2026-12-06 each
of those four kept an index of its own, so a process parsed every agent card up to four times, each with
a full copy of the names; and a read racing another one could feed an older card after a newer one and
give a renamed agent its old name back.
"""

from __future__ import annotations

import asyncio

from trustscore.names import NameIndex
from trustscore.store.projection_tables import ProjectionStore

PAGE = 2_000  # agent cards of each kind read per query
#: Seconds between a serving process's background reads (app.py): the first at its start, so its first
#: page or search does not read every card (~0.2 s of it at 20,000 agents, growing with them); later
#: ones read the cards since.
WARM_INTERVAL = 60.0


class AgentDirectory:
    """The :class:`~trustscore.names.NameIndex` of every agent card projected in ``store``, brought up to
    date by :meth:`read`."""

    def __init__(self, store: ProjectionStore) -> None:
        self.store = store
        self._index = NameIndex()
        self._lock = asyncio.Lock()
        self._started = 0  # reads of the store started so far (numbered 1, 2, ...)
        self._finished = 0  # the number of the newest read whose cards are in the index

    async def warm(self, stop: asyncio.Event) -> NameIndex | None:
        """A serving process's background read (through the agent search's warm-up, api/app.py), at its
        start and every :data:`WARM_INTERVAL`: the cards since the last read, given up between pages once
        ``stop`` is set (a first read of 10^6 cards would hold a shutdown for seconds), then the ids sorted
        (else the first leaderboard's work). The index read, None if it was given up."""
        index = await self.read(stop)
        if stop.is_set():
            return None
        index.ids()
        return index

    async def read(self, stop: asyncio.Event | None = None) -> NameIndex:
        """The index with every agent card the store had projected when this call was made (with
        ``stop``, what was read when it was set: the next read goes on from there).

        Reads run one at a time; a caller that finds a read started after it asked already finished
        takes that read's index without a query of its own, so callers arriving together share about two
        reads, and nobody gets an answer older than their question."""
        asked = self._started
        async with self._lock:
            if self._finished > asked:
                return self._index
            self._started += 1
            number = self._started
            last: int | None = -1
            while last is not None:  # a page at a time: a first read of 10^6 cards holds a page of leaves
                rows, last = await self.store.agent_names_since(self._index.next_index, PAGE)
                for index, agent, name in rows:  # fed without an await: each card whole
                    self._index.add(index, agent, name)
                if stop is not None and stop.is_set():
                    return self._index  # not finished: a caller waiting meanwhile reads on
            self._finished = number
        return self._index
