"""Find agents by display name or id: what an agent about to hire another types first.

Names are matched by their confusable skeleton (trustscore.names), so "PayBot" also finds "Pay-B0t" and a
look-alike cannot hide from a search for the name it imitates; ids match by prefix. The index is fed
agent cards in log order, like the look-alike index, so a query costs one read of the cards logged since
the previous one and a scan of the names held (every agent's current name, in memory).
"""

from __future__ import annotations

from dataclasses import dataclass

from trustscore.errors import InvalidInput
from trustscore.names import skeleton
from trustscore.store.projection_tables import ProjectionStore

MAX_QUERY = 100
MAX_RESULTS = 50


@dataclass(frozen=True)
class Found:
    id: str
    name: str
    exact: bool  # the name's skeleton (or the id) equals the query's


class AgentSearch:
    """Every agent's current display name, searchable by skeleton substring or id prefix."""

    def __init__(self, store: ProjectionStore) -> None:
        self.store = store
        self._names: dict[str, tuple[str, str]] = {}  # id -> (display name, skeleton)
        self._next = 0

    async def _refresh(self) -> None:
        for index, agent, name in await self.store.agent_names_since(self._next):
            self._names[agent] = (name, skeleton(name))
            self._next = max(self._next, index + 1)

    async def search(self, query: str, limit: int) -> list[Found]:
        """Agents whose name contains ``query`` (as skeletons) or whose id starts with it; exact matches
        first, then by name and id. At most ``limit`` (1..50)."""
        text = query.strip()
        if not text or len(query) > MAX_QUERY or not text.isprintable():
            raise InvalidInput(f"query must be 1..{MAX_QUERY} printable characters")
        if not 1 <= limit <= MAX_RESULTS:
            raise InvalidInput(f"limit must be 1..{MAX_RESULTS}")
        await self._refresh()
        key, lowered = skeleton(text), text.lower()
        found = [
            Found(agent, name, sk == key or agent == lowered)
            for agent, (name, sk) in self._names.items()
            if (key and key in sk) or agent.startswith(lowered)
        ]
        found.sort(key=lambda f: (not f.exact, f.name.casefold(), f.id))
        return found[:limit]
