"""A server started on evidence an earlier release derived differently derives it again from the log.

The projector stores the evidence it derives and, on a restart, reloads it; it never derived an entry
twice. So a release changing the derivation (work-evidence@2 counts a CI party's reported failures, which
@1 gave no evidence or a success) went on serving, for every entry logged before it, what the older
derivation had stored, while its rating responses named the new version and ``trustscore evidence
export`` derived the whole log under it: the served delivery 100 against the export's 44 for the same log
(found by review, 2026-12-07). The evidence table now records the derivation's versions, and start-up
derives it all again when they differ (or were never recorded).
"""

from __future__ import annotations

import asyncio

import asyncpg
import msgspec
import pytest

from tests.unit.evidence.test_work_failures import GREEN_CI, RED_CI, World
from trustscore.evidence.derive import evidence_batch
from trustscore.evidence.project_log import RECORDED
from trustscore.ledger.submission import check, prepare
from trustscore.scoring import score_agents
from trustscore.services.metrics import Metrics
from trustscore.services.projector import Projector, rederive
from trustscore.services.ratings import RatingService, load_models
from trustscore.store.log import LogStore
from trustscore.store.projection_tables import _PROJECTOR_LOCK, ProjectionStore, name_derivation

COLUMNS = "idx, seq, agent, dimension, source, value, result, key, at, issuer, extra_weight"


async def _stored(pool: asyncpg.Pool) -> list[tuple[object, ...]]:
    return [tuple(r) for r in await pool.fetch(f"SELECT {COLUMNS} FROM evidence ORDER BY idx, seq")]


async def _ladder(pool: asyncpg.Pool) -> list[dict[str, object]]:
    return [dict(r) for r in await pool.fetch("SELECT * FROM ladder ORDER BY idx, pos")]


async def _served_equals_offline(store: LogStore, projections: ProjectionStore, world: World) -> bool:
    """Whether a server starting now serves the ratings the offline projection's evidence gives."""
    models = load_models()
    ratings = RatingService(projections, models, Metrics())
    projector = Projector(store, projections, world.log_key.public_key, ratings, rating_lag=0.0)
    await projector.load()
    await projector.catch_up()
    batch = evidence_batch(world.evidence)
    for model, weights in models.items():
        served = ratings.rating(world.agent.id, model)
        assert served is not None
        [offline] = [r for r in score_agents(batch, None, weights, served.at) if r.agent == world.agent.id]
        if served.rating != offline:
            return False
    return True


async def test_evidence_an_older_derivation_stored_is_derived_again_at_start(
    dsn: str, pool: asyncpg.Pool
) -> None:
    world = World()
    for day in range(5):
        world.work(day, confirmations=[GREEN_CI])
    for day in range(5, 10):
        world.work(day, confirmations=[RED_CI])
    for day in range(10, 12):
        world.work(day, claim="failed")
    world.rate(12)  # the offline projection, verified
    known = {world.log_key.id: world.log_key.public_key, world.agent.id: world.agent.public_key}
    known[world.market.id] = world.market.public_key
    store = LogStore(pool)
    await store.append([check(prepare(msgspec.to_builtins(e)), known.get) for e in world.envelopes])

    assert await rederive(dsn, world.log_key.public_key) == 0  # a new database: versions recorded
    assert await rederive(dsn, world.log_key.public_key) is None
    projections = ProjectionStore(pool)
    assert await _served_equals_offline(store, projections, world)  # projects the log
    derived = await _stored(pool)
    offline = [
        (d.index, 0, d.agent, d.dimension, d.source, d.value, d.result, d.key, d.at, d.issuer, d.extra_weight)
        for d in world.evidence
    ]
    assert derived == offline and sum(1 for row in derived if row[6] == "failure") == 7
    ladder = await _ladder(pool)
    assert [row["seq"] for row in ladder[-2:]] == [0, 0]  # a claimed failure's row names its item

    # What work-evidence@1 stored: red CI a success at rung 1's weight, a claimed failure nothing (written
    # as the owner: the app role the pool acts as may not change evidence, nor may the server)
    owner = await asyncpg.connect(dsn)
    await owner.execute("ALTER TABLE evidence DISABLE TRIGGER evidence_append_only")
    await owner.execute(
        "UPDATE evidence SET value = 1, result = 'success', extra_weight = 0.1 WHERE result = 'failure' "
        "AND idx < $1",
        len(world.envelopes) - 2,
    )
    await owner.execute("DELETE FROM evidence WHERE result = 'failure'")
    await owner.execute(
        "UPDATE projection_versions SET version = 'work-evidence@1' WHERE part = 'work_evidence'"
    )
    await owner.execute("ALTER TABLE evidence ENABLE TRIGGER evidence_append_only")
    # and its ladder rows of claimed failures named no item; one entry's rows were written under rule@0
    first = ladder[0]["idx"]
    await owner.execute("ALTER TABLE ladder DISABLE TRIGGER ladder_append_only")
    await owner.execute("UPDATE ladder SET seq = NULL WHERE idx >= $1", len(world.envelopes) - 2)
    await owner.execute("UPDATE ladder SET rule = 'ladder-rule@0' WHERE idx = $1", first)
    await owner.execute("ALTER TABLE ladder ENABLE TRIGGER ladder_append_only")
    assert await _stored(pool) != offline
    assert not await _served_equals_offline(store, projections, world)  # a restart alone serves @1's

    assert await rederive(dsn, world.log_key.public_key) == len(world.envelopes)
    assert await _stored(pool) == offline
    # every row as a projection from the start writes it, each entry's under the rule it was written with
    assert await _ladder(pool) == [
        {**row, "rule": "ladder-rule@0"} if row["idx"] == first else row for row in ladder
    ]
    assert await _served_equals_offline(store, projections, world)  # a restarted server's ratings
    versions = {r["part"]: r["version"] for r in await pool.fetch("SELECT * FROM projection_versions")}
    assert versions == RECORDED
    assert await rederive(dsn, world.log_key.public_key) is None

    # A database from before the versions were recorded is derived again too, with the rows of entries the
    # ladder's backfill (migration 0013) had not reached yet.
    await owner.execute("DELETE FROM projection_versions")
    await owner.execute("ALTER TABLE evidence DISABLE TRIGGER evidence_append_only")
    await owner.execute("DELETE FROM evidence WHERE result = 'failure'")
    await owner.execute("ALTER TABLE evidence ENABLE TRIGGER evidence_append_only")
    await owner.execute("ALTER TABLE ladder DISABLE TRIGGER ladder_append_only")
    await owner.execute("DELETE FROM ladder WHERE idx < 5")
    await owner.execute("ALTER TABLE ladder ENABLE TRIGGER ladder_append_only")
    await owner.execute("UPDATE projection_state SET next_index = 5 WHERE name = 'ladder_backfill'")
    assert await rederive(dsn, world.log_key.public_key) == len(world.envelopes)
    assert await _stored(pool) == offline
    assert await _ladder(pool) == ladder  # entry 3's rows under the current rule, having had none
    assert await pool.fetchval("SELECT next_index FROM projection_state WHERE name = 'ladder_backfill'") == 0
    await owner.close()
    await owner.close()


async def test_a_process_of_another_release_may_not_move_the_projection(dsn: str, pool: asyncpg.Pool) -> None:
    """An old worker still running after the re-derivation went on adding evidence derived under its own
    versions, and every later start found the versions current (found by review). Once versions are
    recorded, the projection moves on only in a transaction naming the same ones (migration 0029)."""
    world = World()
    world.work(0, confirmations=[RED_CI])
    known = {world.log_key.id: world.log_key.public_key, world.agent.id: world.agent.public_key}
    known[world.market.id] = world.market.public_key
    store = LogStore(pool)
    await store.append([check(prepare(msgspec.to_builtins(e)), known.get) for e in world.envelopes])
    move = "UPDATE projection_state SET next_index = next_index + 1 WHERE name = 'log'"
    async with pool.acquire() as conn, conn.transaction():  # no versions recorded yet: a test's store
        await conn.execute(move)
    assert await rederive(dsn, world.log_key.public_key) == 1  # what was "projected" is derived again
    for named in ("", "standing standing-v3, work_evidence work-evidence@1"):
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute("SELECT set_config('trustscore.derivation', $1, true)", named)
            with pytest.raises(asyncpg.InsufficientPrivilegeError, match="may not project"):
                await conn.execute(move)
    assert await ProjectionStore(pool).projected_size() == 1
    async with pool.acquire() as conn, conn.transaction():  # this release's steps name its versions
        await name_derivation(conn)
        await conn.execute(move)
    projections = ProjectionStore(pool)
    assert await projections.projected_size() == 2

    # a start on current versions does not wait for a projector's step (every process starts so)
    async with pool.acquire() as conn, conn.transaction():
        await conn.execute("SELECT pg_advisory_xact_lock($1)", _PROJECTOR_LOCK)
        assert await asyncio.wait_for(rederive(dsn, world.log_key.public_key), 60) is None
