"""Entries and evidence partitioned by log index (migration 0017): a log written under 0016 is converted in
place and keeps every row and its root; partitions and side tables stay append-only; appends cross
partition boundaries, concurrently, without ever missing a partition; a lookup by index reads one
partition."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass

import asyncpg
import msgspec
import pytest

from tests.integration.store.test_group_commit import card
from trustscore.cli.agent import card_envelope
from trustscore.errors import NonceReplay
from trustscore.evidence.project_log import ProjectionState, project
from trustscore.kinds.approvals import make_approval
from trustscore.kinds.events import make_event
from trustscore.kinds.parties import make_party_card
from trustscore.ledger import checkpoint, dsse, keys, note
from trustscore.ledger.submission import CheckedEntry, check, prepare
from trustscore.services.audit import fsck_database
from trustscore.store import db
from trustscore.store.log import ENTRY_COLUMNS, LogStore, StoredEntry, entry_records
from trustscore.store.projection_tables import ProjectionStore

LOG_KEY = keys.SigningKey.from_seed(b"\x16" * 32)
ORIGIN = "test/partitions"
VERIFIER = note.verifier_for(ORIGIN, LOG_KEY.public_key)
SPAN = 8  # tiny, so a few dozen entries cross many partition boundaries


def sign(size: int, root: bytes) -> str:
    return checkpoint.sign_checkpoint(checkpoint.Checkpoint(ORIGIN, size, root), LOG_KEY, ORIGIN)


async def owner(dsn: str) -> asyncpg.Connection:
    return await asyncpg.connect(dsn)  # the migrating role, not the app role


async def migrate_with_span(dsn: str, span: int = SPAN, *, until: int | None = None) -> None:
    """Migrate to 0016, fix the partition span (as an operator would before 0017), then on."""
    await db.migrate(dsn, until=16)
    conn = await owner(dsn)
    try:
        await conn.execute("INSERT INTO log_meta (key, value) VALUES ('partition_span', $1)", str(span))
    finally:
        await conn.close()
    await db.migrate(dsn, until=until)


@dataclass
class Signed:
    """Real signed statements: a marketplace, its approval by the log key, agents and their events."""

    keys: dict[str, bytes]
    entries: list[CheckedEntry]

    @classmethod
    def make(cls, agents: int, events: int) -> Signed:
        market = keys.SigningKey.generate()
        people = [keys.SigningKey.generate() for _ in range(agents)]
        envelopes = [
            dsse.sign(make_party_card(market.public_key, "market", "marketplace"), [market]),
            dsse.sign(make_approval(operator=LOG_KEY.id, marketplace=market.id, action="approve"), [LOG_KEY]),
            *(card_envelope(a, f"agent {i}") for i, a in enumerate(people)),
        ]
        for i in range(events):
            event = make_event(
                marketplace=market.id,
                agent=people[i % agents].id,
                event="delivered",
                ref=f"order-{i}",
                occurred_at="2026-11-29T00:00:00Z",
            )
            envelopes.append(dsse.sign(event, [market]))
        known = {k.id: k.public_key for k in (market, LOG_KEY, *people)}
        return cls(known, [checked(e, known) for e in envelopes])


def checked(env: dsse.Envelope, known: dict[str, bytes]) -> CheckedEntry:
    return check(prepare(msgspec.to_builtins(env)), known.get)


def fresh_cards(tag: str, n: int) -> list[CheckedEntry]:
    """``n`` agent cards of new keys, checked."""
    return [checked(card_envelope(keys.SigningKey.generate(), f"{tag}{i}"), {}) for i in range(n)]


async def append_as_0016(pool: asyncpg.Pool, entries: Sequence[CheckedEntry]) -> None:
    """What LogStore.append wrote before migration 0017: the entries (their UNIQUE constraints in place)
    and the keys the cards introduce, under the sequence lock."""
    async with pool.acquire() as conn, conn.transaction():
        start: int = await conn.fetchval("SELECT next_index FROM log_sequence FOR UPDATE")
        new = list(enumerate(entries, start))
        await conn.copy_records_to_table("entries", columns=ENTRY_COLUMNS, records=entry_records(new))
        await LogStore._register_keys(conn, new)
        await conn.execute("UPDATE log_sequence SET next_index = $1", start + len(new))


async def project_all(pool: asyncpg.Pool) -> None:
    state = ProjectionState(LOG_KEY.public_key)
    projections = ProjectionStore(pool)
    while await projections.step(lambda rows: project(rows, state, verify=False), 7) is not None:
        pass


async def dump(conn: asyncpg.Connection) -> dict[str, list[tuple[object, ...]]]:
    """Every row of the tables the migration rewrites or re-keys, in a fixed order."""
    order = {
        "entries": "idx",
        "evidence": "idx, seq",
        "keys": "id",
        "ladder": "idx, pos",
        "snapshots": "idx, agent",
        "checkpoints": "size",
        "tree_nodes": "level, idx",
    }
    return {
        t: [tuple(r) for r in await conn.fetch(f"SELECT * FROM {t} ORDER BY {o}")] for t, o in order.items()
    }


async def foreign_keys(conn: asyncpg.Connection) -> set[tuple[str, str, str]]:
    """The foreign keys declared on a table (not the per-partition clones PostgreSQL derives)."""
    rows = await conn.fetch(
        "SELECT conrelid::regclass::text AS t, conname, pg_get_constraintdef(oid) AS def FROM pg_constraint "
        "WHERE contype = 'f' AND conparentid = 0 AND confrelid IN ('entries'::regclass, 'evidence'::regclass)"
    )
    return {(r["t"], r["conname"], r["def"]) for r in rows}


async def partitions(conn: asyncpg.Connection, table: str) -> list[tuple[int, int]]:
    rows = await conn.fetch(
        "SELECT pg_get_expr(c.relpartbound, c.oid) AS bound FROM pg_inherits i "
        "JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = $1::regclass",
        table,
    )
    out = []
    for r in rows:
        lo, hi = (
            int(x) for x in r["bound"].replace("FOR VALUES FROM ('", "").replace("')", "").split(" TO ('")
        )
        out.append((lo, hi))
    return sorted(out)


@dataclass
class Migrated:
    dsn: str
    store: LogStore
    signed: Signed
    before: dict[str, list[tuple[object, ...]]]
    fks_before: set[tuple[str, str, str]]


@pytest.fixture
async def migrated(dsn: str) -> AsyncIterator[Migrated]:
    """A log written and projected under migration 0016, then migrated to 0017 with the app running."""
    await migrate_with_span(dsn, until=16)
    pool = await db.create_pool(dsn, min_size=1, max_size=4)
    signed = Signed.make(agents=5, events=30)
    for at in range(0, len(signed.entries), 9):  # several checkpoints along the way
        await append_as_0016(pool, signed.entries[at : at + 9])
        await LogStore(pool).integrate(sign, max_batch=1000)
    conn = await owner(dsn)
    try:  # this release's projector writes the ladder's repo column (migration 0030, which keeps it)
        await conn.execute("ALTER TABLE ladder ADD COLUMN repo text")
    finally:
        await conn.close()
    await project_all(pool)
    await pool.close()
    conn = await owner(dsn)
    try:
        before = await dump(conn)
        fks_before = await foreign_keys(conn)
        assert len(before["evidence"]) >= 30  # every delivered event is evidence
        assert (await db.migrate(dsn))[:2] == ["0017_partitions.sql", "0018_hash_tiles.sql"]
    finally:
        await conn.close()
    pool = await db.create_pool(dsn, min_size=1, max_size=4)
    yield Migrated(dsn, LogStore(pool), signed, before, fks_before)
    pool.terminate()


async def test_the_migration_keeps_every_row_the_root_and_the_foreign_keys(migrated: Migrated) -> None:
    conn = await owner(migrated.dsn)
    try:
        assert await dump(conn) == migrated.before
        assert await foreign_keys(conn) == migrated.fks_before
        kinds = await conn.fetch(
            "SELECT relname, relkind::text FROM pg_class WHERE relname IN ('entries', 'evidence') ORDER BY relname"
        )
        assert [(r["relname"], r["relkind"]) for r in kinds] == [("entries", "p"), ("evidence", "p")]
        n = len(migrated.signed.entries)
        want = [(k * SPAN, (k + 1) * SPAN) for k in range((n - 1) // SPAN + 2)]  # every index, one spare
        assert await partitions(conn, "entries") == want
        assert await partitions(conn, "evidence") == want
        assert await conn.fetchval("SELECT value FROM log_meta WHERE key = 'partition_span'") == str(SPAN)
        # The side tables name every entry.
        assert (
            await conn.fetchval(
                "SELECT count(*) FROM entries e JOIN entry_statements s ON s.idx = e.idx "
                "AND s.statement_hash = e.statement_hash JOIN entry_nonces o ON o.idx = e.idx "
                "AND (o.signer, o.nonce) = (e.signer, e.nonce)"
            )
            == n
        )
        # The foreign keys still hold: no key may name an entry that does not exist.
        with pytest.raises(asyncpg.ForeignKeyViolationError):
            await conn.execute(
                "INSERT INTO keys (id, public_key, first_idx) VALUES ('x', $1, $2)", b"\x00" * 32, n + 3
            )
    finally:
        await conn.close()
    report = await fsck_database(migrated.dsn, VERIFIER, batch=5)
    assert report.clean and report.root_matches, report.problems
    assert report.entries == report.checkpoint_size == len(migrated.signed.entries)


async def test_lookups_resubmissions_and_replays_after_the_migration(migrated: Migrated) -> None:
    store, entries = migrated.store, migrated.signed.entries
    for i, e in enumerate(entries):
        assert await store.statement_index(e.statement_hash) == i
        assert await store.nonce_used(e.signer, e.nonce)
        stored = await store.entry_by_nonce(e.signer, e.nonce)
        assert stored is not None and (stored.index, stored.leaf) == (i, e.leaf)
    found = await store.existing([e.statement_hash for e in entries[::5]])
    assert {h: (a.index, a.duplicate) for h, a in found.items()} == {
        e.statement_hash: (i * 5, True) for i, e in enumerate(entries[::5])
    }
    n = len(entries)
    # The same statement again: its first index back. A new statement with a used nonce: a replay.
    again = await store.append([entries[3], entries[17]])
    assert [(a.index, a.duplicate) for a in again] == [(3, True), (17, True)]
    key = keys.SigningKey.generate()
    first = await store.append([card(key, "first", "n" * 32)])
    assert [(a.index, a.duplicate) for a in first] == [(n, False)]
    with pytest.raises(NonceReplay, match=r"entries\[1\]: nonce 'n{32}' of .* was already used"):
        await store.append([card(keys.SigningKey.generate(), "x", "m" * 32), card(key, "renamed", "n" * 32)])
    assert await store.sequenced_size() == n + 1
    await store.integrate(sign, max_batch=1000)
    report = await fsck_database(migrated.dsn, VERIFIER, batch=1000)
    assert report.clean and report.root_matches, report.problems


@pytest.mark.parametrize(
    ("table", "column"),
    [
        ("entries", "nonce"),
        ("entries_p0", "nonce"),  # a partition addressed directly
        ("evidence", "agent"),
        ("evidence_p2", "agent"),
        ("entry_statements", "idx"),
        ("entry_nonces", "nonce"),
    ],
)
async def test_partitions_and_side_tables_refuse_change_even_for_the_owner(
    migrated: Migrated, table: str, column: str
) -> None:
    conn = await owner(migrated.dsn)
    try:
        before = await conn.fetchval(f"SELECT count(*) FROM {table}")
        assert before >= 1
        for sql in (
            f"UPDATE {table} SET {column} = {column}",
            f"DELETE FROM {table}",
            f"TRUNCATE {table} CASCADE",
        ):
            with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
                await conn.execute(sql)
        assert await conn.fetchval(f"SELECT count(*) FROM {table}") == before
    finally:
        await conn.close()


async def test_a_partition_made_by_an_append_is_append_only_and_closed_to_the_app_role(
    migrated: Migrated,
) -> None:
    n = len(migrated.signed.entries)
    newest = f"entries_p{(n - 1) // SPAN + 1}"  # the spare one; the appends below fill it and make more
    await migrated.store.append(
        [checked(card_envelope(keys.SigningKey.generate(), f"a{i}"), {}) for i in range(SPAN)]
    )
    conn = await owner(migrated.dsn)
    try:
        made = await conn.fetch(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid "
            "WHERE i.inhparent = 'entries'::regclass AND c.relname > $1 ORDER BY 1",
            newest,
        )
        assert made, "no partition was made ahead"
        for table in (newest, *(r["relname"] for r in made)):
            with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
                await conn.execute(f"TRUNCATE {table} CASCADE")
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
            await conn.execute(f"DELETE FROM {newest}")
    finally:
        await conn.close()
    async with migrated.store.pool.acquire() as app:
        assert await app.fetchval("SELECT current_user") == db.APP_ROLE
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="permission denied"):
            await app.fetchval(f"SELECT count(*) FROM {newest}")  # only through the parent
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await app.execute(f"ALTER TABLE {newest} DISABLE TRIGGER USER")


async def test_a_lookup_by_index_reads_one_partition(migrated: Migrated) -> None:
    async with migrated.store.pool.acquire() as conn:
        plan = await conn.fetchval("EXPLAIN (FORMAT JSON) SELECT leaf FROM entries WHERE idx = $1", 20)
        assert scanned(json.loads(plan)) == {f"entries_p{20 // SPAN}"}
        e = migrated.signed.entries[20]
        plan = await conn.fetchval(  # the nonce lookup: the join on idx prunes at run time
            "EXPLAIN (ANALYZE, FORMAT JSON) SELECT e.leaf FROM entry_nonces n JOIN entries e ON e.idx = n.idx "
            "WHERE n.signer = $1 AND n.nonce = $2",
            e.signer,
            e.nonce,
        )
        assert scanned(json.loads(plan), executed=True) == {"entry_nonces", f"entries_p{20 // SPAN}"}
        plan = await conn.fetchval("EXPLAIN (FORMAT JSON) SELECT * FROM evidence WHERE idx = $1", 20)
        assert scanned(json.loads(plan)) == {f"evidence_p{20 // SPAN}"}


class Recording:
    """A pool that records the statements run through it (with their arguments)."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool
        self.ran: list[tuple[str, tuple[object, ...]]] = []

    async def fetchrow(self, query: str, *args: object) -> object:
        self.ran.append((query, args))
        return await self.pool.fetchrow(query, *args)

    async def fetch(self, query: str, *args: object) -> object:
        self.ran.append((query, args))
        return await self.pool.fetch(query, *args)

    async def fetchval(self, query: str, *args: object) -> object:
        self.ran.append((query, args))
        return await self.pool.fetchval(query, *args)


async def test_a_nonce_lookup_plans_no_partition_but_the_one_holding_its_entry(migrated: Migrated) -> None:
    """Every report asks, before grading, whether its nonce is known. Its statements are planned at
    each execution (db.py: force_custom_plan); a join of the side table with entries on idx pruned only
    at run time, so each plan considered every partition: PostgreSQL CPU per report grew with the log
    (session 21: 115-128 µs with 2 partitions, 365-540 µs with 22). Planned now: none for an unknown
    nonce, the one partition holding the entry for a known one."""
    store, entries = migrated.store, migrated.signed.entries
    partitions = {f"entries_p{k}" for k in range(len(entries) // SPAN + 1)}
    assert len(partitions) >= 5
    recording = Recording(store.pool)
    store.pool = recording  # type: ignore[assignment]
    e = entries[20]
    lookups: dict[str, tuple[Callable[[], Awaitable[object]], set[str]]] = {
        "unknown": (lambda: store.entry_by_nonce_and_nonce_used(e.signer, "none", e.signer, e.nonce), set()),
        "unknown alone": (lambda: store.entry_by_nonce(e.signer, "none"), set()),
        "known": (
            lambda: store.entry_by_nonce_and_nonce_used(e.signer, e.nonce, e.signer, "x"),
            {f"entries_p{20 // SPAN}"},
        ),
        "known alone": (lambda: store.entry_by_nonce(e.signer, e.nonce), {f"entries_p{20 // SPAN}"}),
    }
    for name, (lookup, want) in lookups.items():
        recording.ran.clear()
        answer = await lookup()
        found = answer[0] if isinstance(answer, tuple) else answer
        assert (found is None) == (not want), name
        assert found is None or (isinstance(found, StoredEntry) and (found.index, found.leaf) == (20, e.leaf))
        planned: set[str] = set()
        async with recording.pool.acquire() as conn:
            for query, args in recording.ran:
                planned |= scanned(json.loads(await conn.fetchval("EXPLAIN (FORMAT JSON) " + query, *args)))
        assert planned & partitions == want, name
    store.pool = recording.pool


def scanned(plan: object, *, executed: bool = False) -> set[str]:
    """The relations a plan (EXPLAIN's JSON) scans; with ``executed``, only the scans that ran."""
    out: set[str] = set()

    def walk(node: object) -> None:
        if isinstance(node, list):
            for n in node:
                walk(n)
        elif isinstance(node, dict):
            if "Relation Name" in node and (not executed or node.get("Actual Loops", 0) > 0):
                out.add(node["Relation Name"])
            for v in node.values():
                walk(v)

    walk(plan)
    return out


@pytest.fixture
async def tiny(dsn: str) -> str:
    """A new database whose partitions span SPAN indexes."""
    await migrate_with_span(dsn)
    return dsn


async def test_concurrent_appenders_cross_many_boundaries(tiny: str) -> None:
    """Four "processes" (own pools and stores) append batches of 1 to 13 entries at once, crossing a
    partition boundary every few appends, with a projector stepping meanwhile: none fails, the indexes
    are contiguous and every partition up to the one after the last index exists."""
    pools = [await db.create_pool(tiny, min_size=1, max_size=2) for _ in range(4)]
    try:
        stores = [LogStore(p) for p in pools]
        done = asyncio.Event()

        async def appender(store: LogStore, w: int) -> list[int]:
            got = []
            for round_ in range(12):
                size = 1 + (w * 5 + round_ * 3) % 13
                batch = [card_envelope(keys.SigningKey.generate(), f"w{w}r{round_}e{i}") for i in range(size)]
                got += [a.index for a in await store.append([checked(e, {}) for e in batch])]
            return got

        async def projector() -> None:
            state = ProjectionState(LOG_KEY.public_key)
            projections = ProjectionStore(pools[0])
            while not done.is_set():
                await projections.step(lambda rows: project(rows, state, verify=False), 5)
                await asyncio.sleep(0)

        steps = asyncio.create_task(projector())
        try:
            results = await asyncio.gather(*(appender(s, w) for w, s in enumerate(stores)))
        finally:
            done.set()
            await steps
        indexes = sorted(i for r in results for i in r)
        n = len(indexes)
        assert indexes == list(range(n)) and n > 20 * SPAN
        await stores[0].integrate(sign, max_batch=10_000)
        conn = await owner(tiny)
        try:
            for table in ("entries", "evidence"):
                have = await partitions(conn, table)
                assert have[: (n - 1) // SPAN + 2] == [
                    (k * SPAN, (k + 1) * SPAN) for k in range((n - 1) // SPAN + 2)
                ]
        finally:
            await conn.close()
    finally:
        for p in pools:
            await p.close()
    assert await db.migrate(tiny) == []
    report = await fsck_database(tiny, VERIFIER, batch=50)
    assert report.clean and report.root_matches, report.problems


async def test_a_failed_group_rolls_back_the_partition_it_made_and_the_others_still_get_theirs(
    tiny: str,
) -> None:
    """Queued groups are first written together under a savepoint: when one replays a nonce, that
    savepoint (and any partition made inside it) is undone, and the groups are written one by one. A
    process that believed the undone partition existed would fail the next write into it."""
    pool = await db.create_pool(tiny, min_size=1, max_size=2)
    try:
        store = LogStore(pool)
        key = keys.SigningKey.generate()
        await store.append([card(key, "first", "n" * 32)])
        fresh = [checked(card_envelope(keys.SigningKey.generate(), f"g{i}"), {}) for i in range(3 * SPAN)]
        replay = card(key, "renamed", "n" * 32)
        results = await store.append_groups(
            [(fresh[: 2 * SPAN], None), ([replay], None), (fresh[2 * SPAN :], None)]
        )
        assert isinstance(results[1], NonceReplay)
        ok = [r for r in results if not isinstance(r, Exception)]
        assert [a.index for r in ok for a in r] == list(range(1, 1 + 3 * SPAN))
        more = await store.append(
            [checked(card_envelope(keys.SigningKey.generate(), f"h{i}"), {}) for i in range(SPAN)]
        )
        assert [a.index for a in more] == list(range(1 + 3 * SPAN, 1 + 4 * SPAN))
    finally:
        await pool.close()


async def test_a_span_that_is_not_a_power_of_two_is_refused(dsn: str) -> None:
    with pytest.raises(asyncpg.RaiseError, match="power of two"):
        await migrate_with_span(dsn, span=1000)


async def test_a_busy_referencing_table_delays_partitions_but_never_fails_an_append(tiny: str) -> None:
    """A writer holding a table that references entries (a long projector step, say) makes the partition
    made ahead give up after its lock timeout, and the append that needs a partition wait for it."""
    pool = await db.create_pool(tiny, min_size=1, max_size=3)
    blocker = await owner(tiny)
    try:
        store = LogStore(pool)
        cards = fresh_cards
        await store.append(cards("a", 1))  # index 0; partitions [0, 16) exist
        tx = blocker.transaction()
        await tx.start()
        await blocker.execute("LOCK TABLE ladder IN ROW EXCLUSIVE MODE")
        got = await store.append(cards("b", SPAN))  # indexes 1..8: into the last partition
        assert [a.index for a in got] == list(range(1, 1 + SPAN))
        assert await partitions(blocker, "entries") == [(0, SPAN), (SPAN, 2 * SPAN)]  # ahead gave up

        async def release() -> None:
            await asyncio.sleep(1.0)
            await tx.commit()

        releasing = asyncio.create_task(release())
        got = await store.append(cards("c", SPAN))  # 9..16: 16 needs a partition, and waits for it
        await releasing
        assert [a.index for a in got] == list(range(1 + SPAN, 1 + 2 * SPAN))
        assert (2 * SPAN, 3 * SPAN) in await partitions(blocker, "entries")
    finally:
        await blocker.close()
        await pool.close()


@pytest.mark.parametrize(
    ("tamper", "problem"),
    [
        ("UPDATE entry_statements SET idx = 3 WHERE idx = 4", "entry 4: its statement row names entry 3"),
        ("DELETE FROM entry_nonces WHERE idx = 9", "entry 9: its nonce row is missing"),
        (
            "INSERT INTO entry_nonces (signer, nonce, idx) VALUES ('k', 'extra-nonce', 2)",
            "entry_nonces has 38 rows for 37 entries",
        ),
    ],
)
async def test_fsck_finds_side_tables_that_disagree_with_the_entries(
    migrated: Migrated, tamper: str, problem: str
) -> None:
    assert len(migrated.signed.entries) == 37  # 2 market statements, 5 cards, 30 events
    conn = await owner(migrated.dsn)
    try:
        table = tamper.split()[2 if tamper.startswith(("DELETE", "INSERT")) else 1]
        await conn.execute(f"ALTER TABLE {table} DISABLE TRIGGER USER")
        await conn.execute(tamper)
    finally:
        await conn.close()
    report = await fsck_database(migrated.dsn, VERIFIER, batch=10)
    assert report.root_matches and problem in report.problems, report.problems
