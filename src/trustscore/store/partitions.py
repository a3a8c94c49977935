"""Range partitions of ``entries`` and ``evidence`` kept ahead of the appends (migration 0017;
docs/operations.md, "Ingest and partitioning").

Every partition covers ``partition_span`` log indexes (log_meta). Partitions are created by the SQL
function ``trustscore_extend_partitions``, which runs as the tables' owner (the app role may not create
tables), and always under the log's sequence-row lock: creating a partition locks the tables that
reference ``entries`` against writes (SHARE ROW EXCLUSIVE) and appends lock the sequence row first, so
taking the sequence row first here too keeps one lock order and no deadlock. Two paths use it:

- **ahead**: after an append that wrote into the last partition, the next one is created in a short
  transaction of its own that waits at most ``AHEAD_LOCK_TIMEOUT`` for its locks (a projector step or an
  autovacuum of a referencing table may hold them); on timeout a later append tries again.
- **needed**: an append about to write an index no partition covers yet creates the partitions first,
  inside the append's transaction, waiting as long as it takes, so no append fails for a missing one.
"""

from __future__ import annotations

import logging

import asyncpg

log = logging.getLogger(__name__)

AHEAD_LOCK_TIMEOUT = "500ms"

Connection = asyncpg.Connection | asyncpg.pool.PoolConnectionProxy


class Partitions:
    """What one process knows of the partitions: every index below ``covered`` has one, committed."""

    def __init__(self) -> None:
        self.covered = 0
        self.span = 0  # learned from the first call

    def _learn(self, covered: int, span: int) -> None:
        self.covered = max(self.covered, covered)
        self.span = span

    async def ahead(self, pool: asyncpg.Pool, last_index: int) -> None:
        """Create the partition after the one holding ``last_index`` when that one is the last."""
        if last_index < self.covered - self.span:
            return
        try:
            async with pool.acquire() as conn, conn.transaction():
                await conn.execute("SELECT 1 FROM log_sequence FOR UPDATE")
                await conn.execute(f"SET LOCAL lock_timeout = '{AHEAD_LOCK_TIMEOUT}'")
                covered, _, span = await _extend(conn, last_index)
        except asyncpg.LockNotAvailableError:
            log.info(
                "partitions: the locks to add one after index %d were busy; a later append retries",
                last_index,
            )
            return
        except (asyncpg.PostgresError, asyncpg.InterfaceError, OSError) as exc:
            # The append has committed: its caller must not see it fail. The needed path still holds.
            log.warning("partitions: could not add one after index %d: %s", last_index, exc)
            return
        self._learn(covered, span)

    def room(self) -> Room:
        return Room(self)


class Room:
    """One append transaction's partitions: those its writes need are created in that transaction.

    What the process learns from it is kept only once the transaction commits, and only from calls that
    created nothing (a partition created under a savepoint that was rolled back does not exist).
    """

    def __init__(self, partitions: Partitions) -> None:
        self._partitions = partitions
        self._created = False
        self._learned: tuple[int, int] | None = None

    async def before_write(self, conn: Connection, last_index: int) -> None:
        """Make sure indexes up to ``last_index`` have their partitions (the sequence row is locked)."""
        if last_index < self._partitions.covered:
            return
        covered, created, span = await _extend(conn, last_index)
        if created:
            self._created = True
        elif not self._created:
            self._learned = (covered, span)

    def committed(self) -> None:
        if self._learned is not None:
            self._partitions._learn(*self._learned)


async def _extend(conn: Connection, last_index: int) -> tuple[int, int, int]:
    """(first index not covered, partitions created, span) after creating what ``last_index`` needs."""
    r = await conn.fetchrow("SELECT covered, created, span FROM trustscore_extend_partitions($1)", last_index)
    assert r is not None
    return r["covered"], r["created"], r["span"]
