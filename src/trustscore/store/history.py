"""SQL of an agent's rating history: the logged rating snapshots that carry a row for it."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import asyncpg


@dataclass(frozen=True)
class SnapshotPoint:
    """One agent's row of one logged rating snapshot."""

    index: int
    at: dt.datetime
    total: int | None
    adjusted: int | None


_WHERE = "SELECT idx, at, total, adjusted FROM snapshots WHERE agent = $1 AND model_version = $2 AND idx >= $3 AND idx < $4 "
_OLDEST = _WHERE + "ORDER BY idx LIMIT $5"
_NEWEST = _WHERE + "ORDER BY idx DESC LIMIT $5"


class HistoryStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def snapshots_of(
        self, agent: str, model_version: str, start: int, end: int, limit: int, *, newest: bool = False
    ) -> list[SnapshotPoint]:
        """``agent``'s rows of ``model_version`` snapshots logged at indexes ``[start, end)``, in log
        order: the first ``limit`` of them, or with ``newest`` the last ``limit`` (served from the
        ``(agent, idx)`` index)."""
        rows = await self.pool.fetch(
            _NEWEST if newest else _OLDEST,
            agent,
            model_version,
            start,
            end,
            limit,
        )
        points = [SnapshotPoint(r["idx"], r["at"], r["total"], r["adjusted"]) for r in rows]
        return points[::-1] if newest else points
