"""Connection pool and numbered SQL migrations applied at start-up."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from importlib import resources

import asyncpg

from trustscore.errors import StorageError

APP_ROLE = "trustscore_app"
_MIGRATION_LOCK = 0x7472757374  # advisory lock key: only one process migrates at a time


def migrations() -> list[tuple[int, str, str]]:
    """(version, name, sql) of every migration shipped in the package, in order."""
    out = []
    for f in resources.files("trustscore.store.migrations").iterdir():
        if f.name.endswith(".sql"):
            version = int(f.name.split("_", 1)[0])
            out.append((version, f.name, f.read_text(encoding="utf-8")))
    return sorted(out)


async def migrate(dsn: str, *, until: int | None = None) -> list[str]:
    """Apply pending migrations, each in its own transaction; return the names applied.

    ``until``: apply none numbered above it (tests build a database as an older release left it).
    """
    try:
        conn = await asyncpg.connect(dsn)
    except (OSError, asyncpg.PostgresError) as exc:
        raise StorageError(f"cannot connect to PostgreSQL: {exc}") from exc
    applied: list[str] = []
    try:
        await conn.execute("SELECT pg_advisory_lock($1)", _MIGRATION_LOCK)
        await conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version int PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())"
        )
        done = {r["version"] for r in await conn.fetch("SELECT version FROM schema_migrations")}
        for version, name, sql in migrations():
            if version in done or (until is not None and version > until):
                continue
            async with conn.transaction():
                await conn.execute(sql)
                await conn.execute(
                    "INSERT INTO schema_migrations (version, name) VALUES ($1, $2)", version, name
                )
            applied.append(name)
        newest = max(done, default=0)
        known = max((v for v, _, _ in migrations()), default=0)
        if newest > known:
            raise StorageError(
                f"database schema version {newest} is newer than this trustscore ({known}); upgrade trustscore"
            )
    finally:
        await conn.close()
    return applied


async def _init_connection(conn: asyncpg.Connection) -> None:
    # Plan every execution for its actual parameters: asyncpg prepares statements, and a generic plan
    # fixed while the log was small (a sequential scan for the nonce check, say) would stay as it grows.
    await conn.execute("SET plan_cache_mode = force_custom_plan")
    # Act with the app role's privileges (read + insert only) wherever the role exists and we may use it.
    may = await conn.fetchval(
        "SELECT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = $1) AND pg_has_role(current_user, $1, 'MEMBER')",
        APP_ROLE,
    )
    if may:
        await conn.execute(f"SET ROLE {APP_ROLE}")


#: Up to this many partitions of ``entries``, the foreign-key checks of :func:`checked_inserts` (and of
#: ``trustscore_append_new``, migration 0025, which has the number written in) use one generic plan.
GENERIC_CHECKS_UP_TO = 16

# The settings before the block, then the block's: the plan mode by the number of partitions of entries.
# (A MATERIALIZED CTE is evaluated on its own, before the outer query reads it: the settings it reads are
# those before the set_config calls.) The app role reads pg_inherits, as PUBLIC may by default.
_CHECKS_BEGIN = (
    "WITH before AS MATERIALIZED (SELECT current_setting('plan_cache_mode') AS mode, "
    "current_setting('enable_seqscan') AS seqscan) "
    "SELECT before.mode, before.seqscan, set_config('plan_cache_mode', CASE WHEN "
    "(SELECT count(*) FROM pg_inherits WHERE inhparent = 'entries'::regclass) <= $1 "
    "THEN 'force_generic_plan' ELSE before.mode END, true), set_config('enable_seqscan', 'off', true) "
    "FROM before"
)
_CHECKS_END = "SELECT set_config('plan_cache_mode', $1, true), set_config('enable_seqscan', $2, true)"


@asynccontextmanager
async def checked_inserts(conn: asyncpg.Connection | asyncpg.pool.PoolConnectionProxy) -> AsyncIterator[None]:
    """Inside a transaction: bulk inserts into a table with a foreign key into ``entries``, whose checks
    reuse one plan while ``entries`` has at most :data:`GENERIC_CHECKS_UP_TO` partitions.

    PostgreSQL checks a foreign key with one query per inserted row, through the plan cache, so under
    ``force_custom_plan`` (:func:`_init_connection`) each row's check was planned anew: on the
    partitioned ``entries`` that made the check of a row about four times its insert (98,000 evidence
    rows: 2.5 s, against 0.95 s with the check's plan kept and 0.49 s with no check; bench/README.md,
    "Report ingest, session 23"). A generic plan is pruned only when it runs, and PostgreSQL 15 locks
    every partition it names at each run: per row, 14 µs at 8 partitions, 19 at 16, 21 at 24, 44-46 at
    50 and 144-152 at 202, against 25-32 µs for a plan made per row at every count (measured by a
    review). So the generic plan is used up to 16 partitions (about 2^24 entries at the default span,
    one partition being kept ahead) and each row's check is planned for it beyond. While it is used, a
    check waits for a lock held on any partition of entries (an ``ALTER TABLE entries_p3 SET TABLESPACE``,
    say), not only on the one it reads. Sequential scans are off in the block either way: a generic
    plan is kept until the table's statistics change, and one made while the log held a few entries
    scanned the partition (cheaper than its index then) at every check as the log grew; the check is a
    lookup of one primary key, so the index is right at every size. The settings the session had are
    back when the block ends. Use it only around inserts (the statements in it are planned the same way),
    in a transaction or savepoint: a block that fails leaves its settings to that (sub)transaction, which
    is rolled back with them.
    """
    before = await conn.fetchrow(_CHECKS_BEGIN, GENERIC_CHECKS_UP_TO)
    assert before is not None
    yield
    await conn.execute(_CHECKS_END, before["mode"], before["seqscan"])


async def _init_read_connection(conn: asyncpg.Connection) -> None:
    await _init_connection(conn)
    # A read pool never writes, even when its URL names a primary by mistake.
    await conn.execute("SET default_transaction_read_only = on")


async def _keep_session(conn: asyncpg.Connection) -> None:
    """Give a connection back to the pool with its session as :func:`_init_connection` set it.

    asyncpg itself rolls back a transaction left open. Its default reset would then run ``RESET ALL``
    (undoing ``plan_cache_mode`` and a read pool's ``default_transaction_read_only`` after the first
    use), ``CLOSE ALL``, ``UNLISTEN *`` and ``pg_advisory_unlock_all()``: one more round trip per query.
    Nothing here leaves such state on a pooled connection: cursors live in transactions, the listener
    and the lease holder keep their connections and end their sessions when done, and the webhook
    dispatcher ends its connection's session if it cannot give its session lock back.
    """


async def create_pool(
    dsn: str, *, min_size: int = 2, max_size: int = 10, read_only: bool = False
) -> asyncpg.Pool:
    """A pool on ``dsn``; ``read_only``: for reads only (a streaming replica's, say), refusing writes."""
    init = _init_read_connection if read_only else _init_connection
    try:
        pool = await asyncpg.create_pool(
            dsn, min_size=min_size, max_size=max_size, init=init, reset=_keep_session
        )
    except (OSError, asyncpg.PostgresError) as exc:
        raise StorageError(f"cannot connect to PostgreSQL: {exc}") from exc
    assert pool is not None
    return pool


@dataclass(frozen=True)
class ReplicaState:
    """What a read database says of itself: whether it is a standby replaying WAL, and the age of the
    newest transaction it has replayed (None when it is not a standby or has replayed nothing yet)."""

    in_recovery: bool
    replay_age_s: float | None


async def replica_state(pool: asyncpg.Pool) -> ReplicaState:
    r = await pool.fetchrow(
        "SELECT pg_is_in_recovery() AS rec,"
        " extract(epoch FROM now() - pg_last_xact_replay_timestamp())::float8 AS age"
    )
    assert r is not None
    return ReplicaState(bool(r["rec"]), r["age"])
