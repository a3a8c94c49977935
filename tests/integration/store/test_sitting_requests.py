"""One agent's sitting requests racing each other: the bounds hold under a per-agent lock.

The service counted an agent's open sittings (and, for scope@1, its sittings of the period) and then
inserted the new one; requests arriving together all counted before any inserted. A review sent 12
scope@1 requests at once through two processes on one database: 5 passed, past the once-a-period rule
and past sitting_max_open (4). store/sittings.py ``SittingStore.insert`` now counts and inserts under a
transaction-level advisory lock of the agent.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os

import asyncpg
import pytest

from trustscore.store import db
from trustscore.store.sittings import Refusal, SittingStore

AGENT = "ts1_" + "ab" * 20


async def _race(dsn: str, exam: str, **bounds: object) -> list[Refusal | None]:
    """12 inserts of ``agent``'s sittings at once, each from its own pool (as from several processes)."""
    await db.migrate(dsn)
    pools = [await db.create_pool(dsn, min_size=1, max_size=1) for _ in range(12)]
    try:
        deadline = dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)
        return list(
            await asyncio.gather(
                *(
                    SittingStore(p).insert(os.urandom(32), AGENT, exam, os.urandom(32), os.urandom(32),
                                           deadline, **bounds)  # type: ignore[arg-type]
                    for p in pools
                )
            )
        )  # fmt: skip
    finally:
        for p in pools:
            await p.close()


@pytest.mark.parametrize(
    ("exam", "bounds", "passed"),
    [
        ("scope@1", {"max_unsettled": 4, "period": ("scope@", 3600.0)}, 1),
        ("integrity@1", {"max_unsettled": 4}, 4),
    ],
    ids=["one scope sitting a period", "sitting_max_open"],
)
async def test_concurrent_requests_of_one_agent_pass_the_bounds_once(
    dsn: str, exam: str, bounds: dict[str, object], passed: int
) -> None:
    results = await _race(dsn, exam, **bounds)
    assert sum(r is None for r in results) == passed, results
    # each refusal names the bound that held: the period (with the request that came first) or the count
    first = [r for r in results if isinstance(r, dt.datetime)]
    assert [r for r in results if r is not None and r not in first] == ["open"] * (12 - passed - len(first))
    assert len(first) == (12 - passed if "period" in bounds else 0)
    conn = await asyncpg.connect(dsn)
    try:
        assert await conn.fetchval("SELECT count(*) FROM sittings WHERE agent = $1", AGENT) == passed
    finally:
        await conn.close()
