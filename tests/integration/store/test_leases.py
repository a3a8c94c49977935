"""Leases on singleton jobs (store/leases.py) on a real PostgreSQL: one holder at a time, and a holder
whose session ends (a killed process) hands the lease over at once."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

import asyncpg

from trustscore.store.leases import Leases


async def test_one_holder_at_a_time_and_a_dead_session_hands_the_lease_over(
    pool: asyncpg.Pool, dsn: str
) -> None:
    first, second = Leases(pool, "trustscore worker pid=1"), Leases(pool, "trustscore worker pid=2")
    assert await first.hold("ratings")
    assert await first.hold("ratings")  # held: confirmed, not taken twice
    assert not await second.hold("ratings")
    assert await second.hold("integrator")  # leases are independent
    holder = await pool.fetchval(
        "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
        "WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted AND a.application_name LIKE '%pid=1'"
    )
    assert holder == "trustscore worker pid=1"  # the holder is named where operators look
    # The holder's session dies (as when its process is killed): PostgreSQL releases the lock.
    backend = await pool.fetchval(
        "SELECT pid FROM pg_stat_activity WHERE application_name = 'trustscore worker pid=1'"
    )
    admin = await asyncpg.connect(dsn)  # the pool's connections take the application role
    try:
        # With a timeout it returns once the backend has exited (and so released its locks), not when the
        # signal is sent: under load the checks below raced the backend's exit.
        assert await admin.fetchval("SELECT pg_terminate_backend($1, 10000)", backend)
    finally:
        await admin.close()
    assert not await first.hold("ratings")  # the lost connection is noticed: no lease
    assert first.held == frozenset()
    assert await second.hold("ratings")
    assert not await first.hold("ratings")  # reconnected, but the lease is taken now
    await second.close()
    assert await eventually(lambda: first.hold("ratings"))  # the server ends the closed session soon
    await first.close()


async def eventually(check: Callable[[], Awaitable[bool]]) -> bool:
    for _ in range(100):
        if await check():
            return True
        await asyncio.sleep(0.05)
    return False
