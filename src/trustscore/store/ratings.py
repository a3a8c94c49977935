"""SQL of the materialised current ratings (migration 0016): written by the ratings lease holder, read
by every API process, which LISTENs on :data:`CHANNEL` to learn of new writes."""

from __future__ import annotations

import datetime as dt
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass

import asyncpg
import msgspec

from trustscore.store.leases import give_back

CHANNEL = "trustscore_ratings"


class RatingRow(msgspec.Struct, frozen=True, gc=False):
    """One stored rating: JSON bytes of the rating and of its medals (None: no medals file). A row whose
    ``rating`` is None says the model no longer rates the agent (migration 0024): readers drop theirs.

    A struct the cycle collector does not track (it holds strings, bytes, a time and a number): a decay
    refresh makes one per agent and model (~0.07 µs each against ~0.8 µs as a frozen dataclass)."""

    model: str
    agent: str
    rating: bytes | None
    medals: bytes | None
    computed_at: dt.datetime
    log_size: int


#: Rows a reader of the changes takes at a time (:meth:`RatingTable.changes`).
PAGE_ROWS = 2_000


@dataclass(frozen=True)
class RatingsState:
    """The newest version written and the log size every rating then holds for."""

    version: int
    log_size: int


class RatingTable:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def write(self, rows: Sequence[RatingRow], log_size: int) -> int:
        """Store ``rows`` (a row never replaces one computed from a longer log prefix or, on the same
        prefix, at a later time) and the log size they hold for, and NOTIFY readers, in one transaction;
        return the new version."""
        async with self.pool.acquire() as conn, conn.transaction():
            version: int = await conn.fetchval(
                "UPDATE ratings_state SET version = version + 1, log_size = greatest(log_size, $1) "
                "RETURNING version",
                log_size,
            )
            if rows:
                await conn.executemany(
                    "INSERT INTO current_ratings AS c "
                    "(model, agent, rating, medals, computed_at, log_size, version) "
                    "VALUES ($1, $2, $3, $4, $5, $6, $7) "
                    "ON CONFLICT (model, agent) DO UPDATE SET rating = excluded.rating, "
                    "medals = excluded.medals, computed_at = excluded.computed_at, "
                    "log_size = excluded.log_size, version = excluded.version "
                    "WHERE (excluded.log_size, excluded.computed_at) >= (c.log_size, c.computed_at)",
                    # A generator: asyncpg encodes the rows as it sends them, with the event loop running
                    # between sends (a list of 3 x 10^5 rows held the loop for 0.15 s).
                    (
                        (r.model, r.agent, r.rating, r.medals, r.computed_at, r.log_size, version)
                        for r in rows
                    ),
                )
            await conn.execute("SELECT pg_notify($1, $2)", CHANNEL, str(version))
        return version

    async def changes(
        self, since: int, take: Callable[[list[RatingRow]], Awaitable[None]], page: int = PAGE_ROWS
    ) -> RatingsState:
        """Pass the rows written after version ``since`` to ``take``, ``page`` rows at a time, all read
        in one snapshot with the state, which is returned. A reader holds about two pages of undecoded
        rows (the page it takes and the one fetched next), not every row: a time refresh rewrites every
        (agent, model) row, 3 x 10^5 rows of 0.7-2.4 KB at 10^5 agents and three models
        (bench/mirror_sync.py). The transaction stays open while ``take`` runs: it should not wait on
        anything slow."""
        if page < 1:
            raise ValueError(f"a page holds at least one row, not {page}")
        async with self.pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
            state = await conn.fetchrow("SELECT version, log_size FROM ratings_state")
            assert state is not None  # migration 0016 inserts the one row
            cursor = await conn.cursor(
                "SELECT model, agent, rating, medals, computed_at, log_size FROM current_ratings "
                "WHERE version > $1",
                since,
            )
            while records := await cursor.fetch(page):
                await take(
                    [
                        RatingRow(
                            r["model"],
                            r["agent"],
                            None if r["rating"] is None else bytes(r["rating"]),
                            None if r["medals"] is None else bytes(r["medals"]),
                            r["computed_at"],
                            r["log_size"],
                        )
                        for r in records
                    ]
                )
                if len(records) < page:
                    break
        return RatingsState(state["version"], state["log_size"])


class Listener:
    """A connection kept from ``pool`` that LISTENs on :data:`CHANNEL` and calls ``notified`` on each
    NOTIFY; reconnected by :meth:`ensure` after it is lost (the caller then re-reads what it missed)."""

    def __init__(self, pool: asyncpg.Pool, notified: Callable[[], None]) -> None:
        self.pool = pool
        self.notified = notified
        self._conn: asyncpg.pool.PoolConnectionProxy | None = None

    async def ensure(self) -> bool:
        """Listen if not listening; True when a (new) connection was made, so changes may have been missed."""
        if self._conn is not None and not self._conn.is_closed():
            return False
        await self.close()
        conn = await self.pool.acquire()
        try:
            await conn.add_listener(CHANNEL, lambda *_: self.notified())
        except BaseException:
            await give_back(self.pool, conn)  # LISTEN may have reached the server: end the session
            raise
        self._conn = conn
        return True

    async def close(self) -> None:
        conn, self._conn = self._conn, None
        await give_back(self.pool, conn)


__all__ = ["CHANNEL", "PAGE_ROWS", "Listener", "RatingRow", "RatingTable", "RatingsState"]
