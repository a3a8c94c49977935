"""SQL of exam sittings: the server's secret and state of each sitting (docs/exams.md, "Sittings")."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from dataclasses import dataclass
from typing import Literal

import asyncpg


@dataclass(frozen=True)
class SittingRow:
    request_sha256: bytes
    agent: str
    exam: str
    secret: bytes
    token_sha256: bytes
    deadline: dt.datetime
    open_index: int | None
    root: bytes | None
    transcripts: dict[str, list[str]]
    state: str
    close_index: int | None
    created_at: dt.datetime


_SELECT = (
    "SELECT request_sha256, agent, exam, secret, token_sha256, deadline, open_index, root, transcripts, "
    "state, close_index, created_at FROM sittings "
)


def _row(r: asyncpg.Record) -> SittingRow:
    return SittingRow(
        bytes(r["request_sha256"]),
        r["agent"],
        r["exam"],
        bytes(r["secret"]),
        bytes(r["token_sha256"]),
        r["deadline"],
        r["open_index"],
        None if r["root"] is None else bytes(r["root"]),
        json.loads(r["transcripts"]),
        r["state"],
        r["close_index"],
        r["created_at"],
    )


class SittingStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def unsettled(self, agent: str) -> int:
        """How many sittings of ``agent`` are opening or open."""
        n: int = await self.pool.fetchval(
            "SELECT count(*) FROM sittings WHERE agent = $1 AND state IN ('opening', 'open')", agent
        )
        return n

    async def newest_of(self, agent: str, exam_prefix: str, seconds: float) -> dt.datetime | None:
        """When ``agent`` last requested a sitting of an exam whose reference starts with ``exam_prefix``
        (opening, open or closed; a void one never opened) within the last ``seconds``, if it did."""
        newest: dt.datetime | None = await self.pool.fetchval(_NEWEST_IN_PERIOD, agent, exam_prefix, seconds)
        return newest

    async def insert(
        self,
        request_sha256: bytes,
        agent: str,
        exam: str,
        secret: bytes,
        token_sha256: bytes,
        deadline: dt.datetime,
        *,
        max_unsettled: int = 2**31 - 1,
        period: tuple[str, float] | None = None,
    ) -> Refusal | None:
        """Insert the sitting unless, counted under a per-agent lock (so that concurrent requests of one
        agent cannot all pass), the agent already has ``max_unsettled`` opening or open, or (``period``:
        an exam prefix and seconds) requested a sitting of such an exam within the period; None when
        inserted, else which bound held: ``"open"``, or the time of the request within the period. The
        service's checks before it refuse in the usual case; this one makes them hold (a review sent 12
        requests at once through two processes: 5 passed both before)."""
        async with self.pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1::bigint)", _agent_lock(agent))
            if (
                await conn.fetchval(
                    "SELECT count(*) FROM sittings WHERE agent = $1 AND state IN ('opening', 'open')", agent
                )
                >= max_unsettled
            ):
                return "open"
            if period is not None:
                newest: dt.datetime | None = await conn.fetchval(_NEWEST_IN_PERIOD, agent, *period)
                if newest is not None:
                    return newest
            await conn.execute(
                "INSERT INTO sittings (request_sha256, agent, exam, secret, token_sha256, deadline) "
                "VALUES ($1, $2, $3, $4, $5, $6)",
                request_sha256,
                agent,
                exam,
                secret,
                token_sha256,
                deadline,
            )
        return None

    async def opened(self, request_sha256: bytes, open_index: int, root: bytes) -> None:
        await self.pool.execute(
            "UPDATE sittings SET state = 'open', open_index = $2, root = $3, updated_at = now() "
            "WHERE request_sha256 = $1 AND state = 'opening'",
            request_sha256,
            open_index,
            root,
        )

    async def void(self, request_sha256: bytes) -> None:
        await self.pool.execute(
            "UPDATE sittings SET state = 'void', updated_at = now() WHERE request_sha256 = $1 AND state = 'opening'",
            request_sha256,
        )

    async def get(self, open_index: int) -> SittingRow | None:
        r = await self.pool.fetchrow(_SELECT + "WHERE open_index = $1", open_index)
        return None if r is None else _row(r)

    async def stale_opening(self, older_than: dt.datetime) -> list[SittingRow]:
        rows = await self.pool.fetch(
            _SELECT + "WHERE state = 'opening' AND created_at < $1 LIMIT 100",
            older_than,
        )
        return [_row(r) for r in rows]

    async def due(self, now: dt.datetime, limit: int = 100) -> list[int]:
        """Open sittings past their deadline (oldest first)."""
        rows = await self.pool.fetch(
            "SELECT open_index FROM sittings WHERE state = 'open' AND deadline < $1 ORDER BY deadline LIMIT $2",
            now,
            limit,
        )
        return [int(r["open_index"]) for r in rows]

    async def record_moves(self, open_index: int, item_id: str, moves: list[str], before: int) -> bool:
        """Store ``moves`` as the item's transcript if it still holds ``before`` moves (no rewinding)."""
        status: str = await self.pool.execute(
            "UPDATE sittings SET transcripts = jsonb_set(transcripts, ARRAY[$2::text], $3::jsonb), "
            "updated_at = now() WHERE open_index = $1 AND state = 'open' "
            "AND jsonb_array_length(COALESCE(transcripts -> $2::text, '[]'::jsonb)) = $4",
            open_index,
            item_id,
            json.dumps(moves),
            before,
        )
        return status.endswith(" 1")

    async def closed(self, open_index: int, close_index: int) -> None:
        await self.pool.execute(
            "UPDATE sittings SET state = 'closed', close_index = $2, updated_at = now() "
            "WHERE open_index = $1 AND state = 'open'",
            open_index,
            close_index,
        )


#: Why :meth:`SittingStore.insert` refused: too many sittings open, or the time of the agent's request
#: within the period.
Refusal = Literal["open"] | dt.datetime

#: When an agent last requested a sitting of an exam under a prefix within a period (seconds), if it did:
#: the once-a-period bound of scope sittings (a void sitting never opened, so it does not count).
_NEWEST_IN_PERIOD = (
    "SELECT max(created_at) FROM sittings WHERE agent = $1 AND starts_with(exam, $2) "
    "AND state <> 'void' AND created_at > now() - make_interval(secs => $3)"
)


def _agent_lock(agent: str) -> int:
    """The transaction-level advisory lock key of ``agent``'s sitting requests (64 bits of SHA-256 of a
    domain and the agent id: no other lock of the application collides with it in practice)."""
    digest = hashlib.sha256(b"trustscore/sittings/agent\x00" + agent.encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)
