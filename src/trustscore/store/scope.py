"""SQL for scope honesty: an agent's cards and scope sittings, as stored leaves (docs/scope-honesty.md)."""

from __future__ import annotations

import asyncpg

from trustscore.kinds.cards import CARD_PREDICATE_TYPES
from trustscore.kinds.sittings import SITTING_CLOSE, SITTING_OPEN

KINDS = (*CARD_PREDICATE_TYPES, SITTING_OPEN.predicate_type, SITTING_CLOSE.predicate_type)


class ScopeStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def newest_card(self, agent: str) -> bytes | None:
        """The leaf of ``agent``'s newest agent card (v1 or v2), if any."""
        leaf = await self.pool.fetchval(
            "SELECT leaf FROM entries WHERE subject = $1 AND kind = ANY($2::text[]) ORDER BY idx DESC LIMIT 1",
            agent,
            list(CARD_PREDICATE_TYPES),
        )
        return None if leaf is None else bytes(leaf)

    async def leaf(self, index: int) -> bytes | None:
        leaf = await self.pool.fetchval("SELECT leaf FROM entries WHERE idx = $1", index)
        return None if leaf is None else bytes(leaf)

    async def agent_leaves(self, agent: str, before: int | None = None) -> list[tuple[int, bytes]]:
        """(index, leaf) of every card and sitting open/close about ``agent``, in log order."""
        rows = await self.pool.fetch(
            "SELECT idx, leaf FROM entries WHERE subject = $1 AND kind = ANY($2::text[]) "
            "AND ($3::bigint IS NULL OR idx < $3) ORDER BY idx",
            agent,
            list(KINDS),
            before,
        )
        return [(r["idx"], bytes(r["leaf"])) for r in rows]
