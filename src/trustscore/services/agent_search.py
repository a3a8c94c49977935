"""Find agents by display name or id: what an agent about to hire another types first.

Names are matched by their confusable skeleton (trustscore.names), so "PayBot" also finds "Pay-B0t" and a
look-alike cannot hide from a search for the name it imitates; ids match by prefix. The index is fed
agent cards in log order (the public service's directory, services/agent_directory.py), so a query costs
one read of the cards logged since the previous one, a search of the index's name order
(:class:`~trustscore.names.NameOrder`: a text search that stops at the limit) and a scan of the agents
renamed or registered since that order was made. Once more than :data:`REORDER` of those are waiting, the
order is made again in a thread (~0.25 s at 10^5 agents, ~5 s at 10^6) while the event loop serves other
requests; searches meanwhile answer from the order made before, scanning the agents changed since. The
first order (none to answer from: a scan of every agent) is waited for, and so is one whose agents changed
since the last pass :data:`WAIT_BEYOND` times :data:`REORDER` (a flood of registrations would otherwise
make every search scan them all on the event loop: 59-193 ms at 10^5 of them). A process serving HTTP
makes the order in the background from its start (:meth:`AgentSearch.warm`), so its first search does not
wait for the first order (~0.4 s at 10^5 agents, ~5 s at 10^6) unless it comes before that making ends.

Before 2026-12-07 every search scanned and sorted every agent on the event loop: a query matching every
id ("ts1") held the whole process ~400 ms at 10^5 agents.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass

from trustscore.errors import InvalidInput
from trustscore.names import NameIndex, NameOrder, skeleton
from trustscore.services.agent_directory import AgentDirectory
from trustscore.services.single_flight import SingleFlight

MAX_QUERY = 100
MAX_RESULTS = 50
REORDER = 2_048  # agents renamed or registered since the order was made, scanned one by one beyond it
RETRY = 60  # seconds after a failed making of the order before the next is tried
WAIT_BEYOND = 4  # times REORDER agents changed since the order beyond which searches wait for the next

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Found:
    id: str
    name: str
    exact: bool  # the name's skeleton (or the id) equals the query's


class AgentSearch:
    """Every agent's current display name (``directory``'s), searchable by skeleton substring or id prefix."""

    def __init__(self, directory: AgentDirectory, reorder: int | None = None) -> None:
        self.directory = directory
        self.reorder = REORDER if reorder is None else reorder
        self._ordering = SingleFlight[None, None]()
        self._retry_at = 0.0  # time.monotonic() before which a failed making is not tried again

    async def search(self, query: str, limit: int, index: NameIndex | None = None) -> list[Found]:
        """Agents whose name contains ``query`` (as skeletons) or whose id starts with it; exact matches
        first, then by name and id. At most ``limit`` (1..50). A caller that has just read the directory
        passes its ``index``, sparing a second read."""
        text = query.strip()
        if not text or len(query) > MAX_QUERY or not text.isprintable():
            raise InvalidInput(f"query must be 1..{MAX_QUERY} printable characters")
        if not 1 <= limit <= MAX_RESULTS:
            raise InvalidInput(f"limit must be 1..{MAX_RESULTS}")
        if index is None:
            index = await self.directory.read()
        making = self._reorder(index)
        # The first order (a scan of every agent would cost what the order spares), or too many agents
        # changed since the last one to scan them on the event loop at each search: wait for it.
        if making is not None and (not index.ordered or index.unordered > WAIT_BEYOND * self.reorder):
            await asyncio.wait([making])  # a caller that goes away leaves it running for the others
        return [
            Found(agent, index.agents[agent].name, exact)
            for agent, exact in index.find(skeleton(text), text.lower(), limit)
        ]

    async def warm(self, stop: asyncio.Event) -> None:
        """A serving process's background step (api/app.py, at its start and every
        :data:`~trustscore.services.agent_directory.WARM_INTERVAL`): the directory's read
        (:meth:`AgentDirectory.warm`), then the name order made where a search would start making it, so
        that the first search after a start (or after many registrations) does not wait for it. Nothing
        is made once ``stop`` is set; a making under way runs to its end (~5 s at 10^6 agents)."""
        index = await self.directory.warm(stop)
        if index is not None and not stop.is_set():
            making = self._reorder(index)
            if making is not None:
                await asyncio.wait([making])

    def _reorder(self, index: NameIndex) -> asyncio.Future[None] | None:
        """The making of ``index``'s name order, started if more agents changed since the last one than
        :attr:`reorder` (and no failed making is waited out); None when none is due."""
        if index.unordered > self.reorder and time.monotonic() >= self._retry_at:
            return self._ordering.start(None, lambda: self._order(index))
        return None

    async def _order(self, index: NameIndex) -> None:
        """``index``'s name order made in a thread (once for the searches asking meanwhile, which read the
        order made before and scan the agents changed since)."""
        try:
            agents, changes = index.snapshot()
            index.order(await asyncio.to_thread(NameOrder.of, agents), changes)
        except Exception:  # MemoryError, say: searches go on with the order they have, or a scan
            log.exception("the agent search's name order could not be made; trying again in %d s", RETRY)
            self._retry_at = time.monotonic() + RETRY
