"""An ``all`` process that starts while another process holds the ``ratings`` lease (a rolling restart's
old instance still alive, a lingering session): it must serve the ratings projected so far, not an empty
table behind a 200 ``/readyz``, and write none of them while it does not hold the lease (found by
review: it served every agent as unrated until it took the lease)."""

from __future__ import annotations

import asyncpg
from litestar.testing import AsyncTestClient

from tests.helpers import new_card
from tests.integration.api.test_attestations import post
from tests.integration.pages.test_pages_api import report
from trustscore.api.app import create_app
from trustscore.settings import Settings
from trustscore.store.leases import Leases


async def test_an_all_process_started_beside_a_lease_holder_serves_its_ratings_and_writes_none(
    settings: Settings, dsn: str
) -> None:
    async with AsyncTestClient(app=create_app(settings, dsn)) as first:
        key, card = new_card("rated before the restart")
        await post(first, "/v1/log/entries", card)
        await report(first, key)  # rated, projected, served
        served = (await first.get(f"/v1/agents/{key.id}/rating", params={"model": "trustscore-v2"})).json()
    pool = await asyncpg.create_pool(dsn, min_size=1, max_size=2)
    old = Leases(pool, "old instance")
    try:
        assert await old.hold("ratings") and await old.hold("integrator")
        version = await pool.fetchval("SELECT version FROM ratings_state")
        async with AsyncTestClient(app=create_app(settings, dsn)) as second:
            assert (await second.get("/readyz")).status_code == 200
            r = await second.get(f"/v1/agents/{key.id}/rating", params={"model": "trustscore-v2"})
            body = r.json()
            assert r.status_code == 200 and body["log_size"] == served["log_size"], body
            assert body["total"] == served["total"] is not None
            assert await pool.fetchval("SELECT version FROM ratings_state") == version  # nothing written
    finally:
        await old.close()
        await pool.close()
