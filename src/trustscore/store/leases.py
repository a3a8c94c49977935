"""Leases on singleton background jobs: PostgreSQL session-level advisory locks on one held connection.

A process that runs background jobs keeps one connection from its pool for its leases and takes each
lease with ``pg_try_advisory_lock(NAMESPACE, key)``. A session lock is released by PostgreSQL itself when
the session ends, so a killed process (SIGKILL, power loss: its connection closes) hands its leases over
without any expiry to tune; a process that loses its lease connection loses every lease it held. The
policy (which job needs which lease, what to do without it) is in :mod:`trustscore.services.periodic`.
The connection's ``application_name`` names the holder, so ``pg_locks`` joined to ``pg_stat_activity``
says which process holds what (docs/operations.md, "Roles and leases").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import zlib

import asyncpg

log = logging.getLogger(__name__)

#: The first key of every lease's two-key advisory lock ("tsls"); the single-key locks of the store
#: (migration, integrator, projector, dispatch) live in another key space (objsubid 1, not 2).
NAMESPACE = 0x74736C73


def lease_key(name: str) -> int:
    """The second (signed 32-bit) key of the lease ``name``."""
    return int.from_bytes(zlib.crc32(name.encode()).to_bytes(4, "big"), "big", signed=True)


def holder_name(role: str) -> str:
    """The ``application_name`` of a lease connection: role and process id."""
    return f"trustscore {role} pid={os.getpid()}"


async def give_back(pool: asyncpg.Pool, conn: asyncpg.pool.PoolConnectionProxy | None) -> None:
    """End the session of a connection kept from ``pool`` and return it (the pool makes a new one); a
    connection the server already closed may have been released by the pool itself."""
    if conn is None:
        return
    with contextlib.suppress(asyncpg.InterfaceError):
        conn.terminate()
    with contextlib.suppress(asyncpg.InterfaceError):
        await pool.release(conn)


class Leases:
    """The leases this process holds, on one connection taken from ``pool`` and kept."""

    def __init__(self, pool: asyncpg.Pool, holder: str) -> None:
        self.pool = pool
        self.holder = holder
        self._conn: asyncpg.pool.PoolConnectionProxy | None = None
        self._held: set[str] = set()
        self._lock = asyncio.Lock()  # one query at a time on the connection

    async def hold(self, name: str) -> bool:
        """Whether this process holds the lease ``name`` now, taking it if it is free. A held lease is
        confirmed by a round trip on its connection: a lost connection means every lease is lost."""
        async with self._lock:
            try:
                conn = await self._connection()
                if name in self._held:
                    await conn.fetchval("SELECT 1")
                    return True
                got: bool = await conn.fetchval(
                    "SELECT pg_try_advisory_lock($1, $2)", NAMESPACE, lease_key(name)
                )
            except Exception as exc:
                await self._drop(exc)
                return False
            if got:
                self._held.add(name)
                log.info("lease %r taken by %s", name, self.holder)
            return got

    @property
    def held(self) -> frozenset[str]:
        return frozenset(self._held)

    async def _connection(self) -> asyncpg.pool.PoolConnectionProxy:
        if self._conn is None or self._conn.is_closed():
            if self._conn is not None:
                await self._drop(None)
            self._conn = await self.pool.acquire()
            await self._conn.execute("SELECT set_config('application_name', $1, false)", self.holder)
        return self._conn

    async def _drop(self, exc: BaseException | None) -> None:
        """Forget the connection and with it every lease (PostgreSQL released them with the session)."""
        if self._held:
            log.warning("leases %s lost (%s)", sorted(self._held), type(exc).__name__ if exc else "closed")
        self._held.clear()
        conn, self._conn = self._conn, None
        await give_back(self.pool, conn)

    async def close(self) -> None:
        """Release every lease (by ending the session) and return the connection."""
        async with self._lock:
            conn, self._conn = self._conn, None
            self._held.clear()
            await give_back(self.pool, conn)  # ends the session: PostgreSQL releases its advisory locks


__all__ = ["NAMESPACE", "Leases", "give_back", "holder_name", "lease_key"]
