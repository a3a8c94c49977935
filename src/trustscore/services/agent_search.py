"""Find agents by display name or id: what an agent about to hire another types first.

Names are matched by their confusable skeleton (trustscore.names), so "PayBot" also finds "Pay-B0t" and a
look-alike cannot hide from a search for the name it imitates; ids match by prefix. The index is fed
agent cards in log order (the public service's directory, services/agent_directory.py), so a query costs
one read of the cards logged since the previous one and a scan of the names held (every agent's current
name, in memory).
"""

from __future__ import annotations

from dataclasses import dataclass

from trustscore.errors import InvalidInput
from trustscore.names import skeleton
from trustscore.services.agent_directory import AgentDirectory

MAX_QUERY = 100
MAX_RESULTS = 50


@dataclass(frozen=True)
class Found:
    id: str
    name: str
    exact: bool  # the name's skeleton (or the id) equals the query's


class AgentSearch:
    """Every agent's current display name (``directory``'s), searchable by skeleton substring or id prefix."""

    def __init__(self, directory: AgentDirectory) -> None:
        self.directory = directory

    async def search(self, query: str, limit: int) -> list[Found]:
        """Agents whose name contains ``query`` (as skeletons) or whose id starts with it; exact matches
        first, then by name and id. At most ``limit`` (1..50)."""
        text = query.strip()
        if not text or len(query) > MAX_QUERY or not text.isprintable():
            raise InvalidInput(f"query must be 1..{MAX_QUERY} printable characters")
        if not 1 <= limit <= MAX_RESULTS:
            raise InvalidInput(f"limit must be 1..{MAX_RESULTS}")
        agents = (await self.directory.read()).agents
        key, lowered = skeleton(text), text.lower()
        found = [
            Found(agent, named.name, named.skeleton == key or agent == lowered)
            for agent, named in agents.items()
            if (key and key in named.skeleton) or agent.startswith(lowered)
        ]
        found.sort(key=lambda f: (not f.exact, f.name.casefold(), f.id))
        return found[:limit]
