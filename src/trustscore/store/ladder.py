"""SQL of the ladder rows (docs/evidence-ladder.md): written in the projector's transaction, read back
for the outcome stats and a rating's per-dimension rung distribution."""

from __future__ import annotations

from collections.abc import Sequence

import asyncpg

from trustscore.ladder.rows import LadderRow

_FIELDS = [
    "idx",
    "seq",
    "agent",
    "dimension",
    "rung",
    "rule",
    "attested",
    "cover",
    "issuer",
    "outcome_detected",
    "summary",
    "kind",
    "model",
    "adapter",
    "exam",
    "marketplace",
    "repo",
]
_SELECT = "SELECT " + ", ".join(_FIELDS) + " FROM ladder "  # noqa: S608 - constant column names


async def insert(
    conn: asyncpg.Connection | asyncpg.pool.PoolConnectionProxy, rows: Sequence[LadderRow]
) -> None:
    """Write ``rows`` (in log order) inside the caller's transaction; ``pos`` numbers them per entry."""
    pos: dict[int, int] = {}
    records = []
    for r in rows:
        n = pos[r.index] = pos.get(r.index, -1) + 1
        records.append(
            (
                r.index,
                n,
                r.seq,
                r.agent,
                r.dimension,
                r.rung,
                r.rule,
                r.attested,
                r.cover,
                r.issuer,
                r.outcome_detected,
                r.summary,
                r.kind,
                r.model,
                r.adapter,
                r.exam,
                r.marketplace,
                r.repo,
            )
        )
    await conn.copy_records_to_table("ladder", columns=["idx", "pos", *_FIELDS[1:]], records=records)


def rows_of(records: Sequence[asyncpg.Record]) -> list[LadderRow]:
    return [_row(r) for r in records]


def _row(r: asyncpg.Record) -> LadderRow:
    return LadderRow(
        index=r["idx"],
        seq=r["seq"],
        agent=r["agent"],
        dimension=r["dimension"],
        rung=r["rung"],
        rule=r["rule"],
        attested=r["attested"],
        cover=r["cover"],
        issuer=r["issuer"],
        outcome_detected=r["outcome_detected"],
        summary=r["summary"],
        kind=r["kind"],
        model=r["model"],
        adapter=r["adapter"],
        exam=r["exam"],
        marketplace=r["marketplace"],
        repo=r["repo"],
    )


_PROJECTOR_LOCK = 0x70726F6A  # the projector's advisory lock (store/projection_tables.py)


class LadderStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def backfill_below(self) -> int:
        """Entries below this index were projected before the ladder existed and have no rows yet."""
        n: int | None = await self.pool.fetchval(
            "SELECT next_index FROM projection_state WHERE name = 'ladder_backfill'"
        )
        return n or 0

    async def backfill(self, rows: Sequence[LadderRow], below: int) -> bool:
        """Write the rows of entries ``[0, below)`` once, under the projector's lock; False if another
        process holds the lock or has done it."""
        async with self.pool.acquire() as conn, conn.transaction():
            if not await conn.fetchval("SELECT pg_try_advisory_xact_lock($1)", _PROJECTOR_LOCK):
                return False
            now = await conn.fetchval(
                "SELECT next_index FROM projection_state WHERE name = 'ladder_backfill' FOR UPDATE"
            )
            if now != below:
                return False
            await insert(conn, [r for r in rows if r.index < below])
            await conn.execute("UPDATE projection_state SET next_index = 0 WHERE name = 'ladder_backfill'")
            return True

    async def records(self, end: int) -> list[asyncpg.Record]:
        """Every ladder row of entries ``[0, end)`` in log order, as the database answered them
        (:func:`rows_of` makes them rows, e.g. in a thread)."""
        return await self.pool.fetch(_SELECT + "WHERE idx < $1 ORDER BY idx, pos", end)

    async def scoring_rows(self, agent: str, start: int, end: int) -> list[LadderRow]:
        """``agent``'s ladder rows of entries ``[start, end)`` that carry scoring evidence, in log order."""
        found = await self.pool.fetch(
            _SELECT + "WHERE agent = $1 AND idx >= $2 AND idx < $3 AND seq IS NOT NULL ORDER BY idx, pos",
            agent,
            start,
            end,
        )
        return [_row(r) for r in found]
