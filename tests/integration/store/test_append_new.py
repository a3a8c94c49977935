"""The common append in one statement (migration 0022, LogStore._append_new): new entries without follow
entries go to the database as one call in a transaction of its own, so the sequence row is locked for
that call and its commit only, not across a client's round trips. Whatever the call cannot write (a
resubmission, a replay, a key registered otherwise, an index without a partition, a writer that skipped
the lock) it leaves untouched, and the general path gives the answer it always gave."""

from __future__ import annotations

import asyncio

import asyncpg
import pytest

from tests.integration.store.conftest import Queries
from tests.integration.store.test_appends_concurrent import AGENTS, hold_nonce, invariants
from tests.integration.store.test_checked_inserts import (
    ENTRY_PARTITION_LOCKS,
    add_entries,
    entries_with_partitions,
)
from tests.integration.store.test_group_commit import card, checked
from tests.integration.store.test_partitions import SPAN, migrate_with_span, owner
from trustscore.errors import InvalidInput, NonceReplay
from trustscore.kinds.parties import make_party_card
from trustscore.ledger import dsse, keys
from trustscore.store import db
from trustscore.store.db import GENERIC_CHECKS_UP_TO
from trustscore.store.log import APPEND_NEW, LogStore, append_new_arguments


def calls(sent: list[str]) -> list[str]:
    """The statements that touched the log: the one-statement call, or the general path's."""
    return ["append_new" if "trustscore_append_new" in q else q.split()[0] for q in sent]


async def test_new_entries_are_one_call_with_nothing_around_it(logged: tuple[LogStore, Queries]) -> None:
    store, queries = logged
    start = await store.sequenced_size()
    queries.take()
    key = keys.SigningKey.generate()
    [a] = await store.append([card(key, "v1", "a" * 32)])
    assert (a.index, a.duplicate) == (start, False)
    assert calls(queries.take()) == ["append_new"]  # no BEGIN, no lock, no COMMIT of the client's
    assert await store.key_entry(key.id) == (key.public_key, start)
    queries.take()
    # A card update (the key registered already, exactly as this card would): one call too, and the
    # key keeps the index of its first card.
    [b] = await store.append([card(key, "v2", "b" * 32)])
    assert calls(queries.take()) == ["append_new"]
    assert (b.index, b.duplicate) == (start + 1, False)
    assert await store.key_entry(key.id) == (key.public_key, start)
    queries.take()
    # Queued groups of new entries: one call for all, each group's indexes in order.
    x, y, z = (card(keys.SigningKey.generate(), n, n * 32) for n in "xyz")
    results = await store.append_groups([([x], None), ([y, z], None)])
    assert calls(queries.take()) == ["append_new"]
    assert [
        [(r.index, r.duplicate) for r in group] for group in results if not isinstance(group, Exception)
    ] == [
        [(start + 2, False)],
        [(start + 3, False), (start + 4, False)],
    ]
    assert [e.leaf for e in await store.entries(start, start + 5)] == [
        e.leaf for e in (card(key, "v1", "a" * 32), card(key, "v2", "b" * 32), x, y, z)
    ]
    assert await store.key_entry(y.signer) is not None and await store.sequenced_size() == start + 5


async def test_what_the_call_cannot_write_it_leaves_to_the_general_path(
    logged: tuple[LogStore, Queries], dsn: str
) -> None:
    store, queries = logged
    key = keys.SigningKey.generate()
    original = card(key, "first", "n" * 32)
    [first] = await store.append([original])
    size = await store.sequenced_size()
    queries.take()
    # A resubmission: the call finds it and writes nothing; the general path answers with its index.
    [again] = await store.append([original])
    assert (again.index, again.duplicate) == (first.index, True)
    assert calls(queries.take())[0] == "append_new"
    # A replayed nonce, alone and beside a new entry: refused whole, nothing written.
    replay = card(key, "renamed", "n" * 32)
    with pytest.raises(NonceReplay, match="already used"):
        await store.append([replay])
    with pytest.raises(NonceReplay, match=r"entries\[1\]"):
        await store.append([card(keys.SigningKey.generate(), "new", "m" * 32), replay])
    # A key registered as an agent, now claimed by a party card: refused as before.
    party = checked(dsse.sign(make_party_card(key.public_key, "p", "counterparty"), [key]))
    with pytest.raises(InvalidInput, match="registered as agent"):
        await store.append([party])
    assert calls(queries.take()).count("append_new") == 3  # each tried the call first
    assert await store.sequenced_size() == size
    conn = await owner(dsn)
    try:
        assert await invariants(conn) == size
        assert await conn.fetchval("SELECT kind FROM keys WHERE id = $1", key.id) == "agent"
    finally:
        await conn.close()


async def test_a_nonce_taken_without_the_lock_undoes_the_call_and_is_a_replay(
    logged: tuple[LogStore, Queries], dsn: str
) -> None:
    """The call's insert waits on a (signer, nonce) another session holds uncommitted, then fails on the
    unique index once it commits: the call is undone whole, and the general path names the replay."""
    store, queries = logged
    entry = card(AGENTS[0], "raced", "r" * 32)
    size = await store.sequenced_size()
    queries.take()
    other = await owner(dsn)
    try:
        tr = await hold_nonce(other, entry)
        appending = asyncio.create_task(store.append([entry]))
        await asyncio.sleep(0.5)
        await tr.commit()
        with pytest.raises(NonceReplay):
            await appending
        assert calls(queries.take())[0] == "append_new"
        # Rolled back instead: the call goes through once the other session is gone.
        fresh = card(AGENTS[1], "raced", "q" * 32)
        tr = await hold_nonce(other, fresh)
        appending = asyncio.create_task(store.append([fresh]))
        await asyncio.sleep(0.5)
        await tr.rollback()
        [written] = await appending
        assert (written.index, written.duplicate) == (size, False)
        assert await other.fetchval("SELECT next_index FROM log_sequence") == size + 1
    finally:
        await other.close()


async def test_an_index_without_a_partition_goes_the_general_way_and_makes_it(dsn: str) -> None:
    """With a tiny partition span, the call never writes past what this process knows is covered: the
    general path creates the partitions (or the next one is made ahead after the call), and the log
    stays a log across every boundary."""
    await migrate_with_span(dsn)
    pool = await db.create_pool(dsn, min_size=1, max_size=1)
    queries = Queries()
    async with pool.acquire() as conn:
        conn.add_query_logger(queries)
    store = LogStore(pool)
    try:
        for i in range(5 * SPAN):
            batch = [
                card(keys.SigningKey.generate(), f"n{i}-{k}", f"{i:030d}{k:02d}") for k in range(1 + i % 3)
            ]
            start = await store.sequenced_size()
            out = await store.append(batch)
            assert [(a.index, a.duplicate) for a in out] == [(start + k, False) for k in range(len(batch))]
        sent = calls(queries.take())
        assert sent.count("append_new") > 3 * SPAN  # most appends were one call
        checker = await owner(dsn)
        try:
            n = await invariants(checker)
            parts = await checker.fetchval(
                "SELECT count(*) FROM pg_inherits WHERE inhparent = 'entries'::regclass"
            )
        finally:
            await checker.close()
        assert parts >= n // SPAN + 1  # every written index has its partition, and one lies ahead
    finally:
        await pool.close()


async def test_a_key_taken_without_the_lock_undoes_the_call_and_the_card_is_refused(
    logged: tuple[LogStore, Queries], dsn: str
) -> None:
    """A key row written (uncommitted) by a session that skipped the sequence lock, as a counterparty,
    while an agent card for that key is appended: the call's insert of the key waits, then fails on the
    key's primary key, and the general path refuses the card; the key stays what it was registered as.
    With "on conflict do nothing" the card was logged against a key registered otherwise (review of
    aade480)."""
    store, queries = logged
    key = keys.SigningKey.generate()
    size = await store.sequenced_size()
    queries.take()
    other = await owner(dsn)
    try:
        tr = other.transaction()
        await tr.start()
        await other.execute(
            "INSERT INTO keys (id, public_key, first_idx, kind, controller, roles) "
            "VALUES ($1, $2, 0, 'counterparty', NULL, '{}')",
            key.id,
            key.public_key,
        )
        appending = asyncio.create_task(store.append([card(key, "raced", "k" * 32)]))
        await asyncio.sleep(0.5)
        await tr.commit()
        with pytest.raises(InvalidInput, match="registered as counterparty"):
            await appending
        assert calls(queries.take())[0] == "append_new"
        assert await other.fetchval("SELECT kind FROM keys WHERE id = $1", key.id) == "counterparty"
        assert await invariants(other) == size
    finally:
        await other.close()


async def test_only_the_app_role_may_call_it_where_functions_are_not_public(dsn: str) -> None:
    """A hardened server revokes EXECUTE on new functions from PUBLIC by default: the migration grants it
    to the app role itself, so appends still go as one call."""
    await db.migrate(dsn, until=21)
    conn = await owner(dsn)
    try:
        await conn.execute("ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC")
    finally:
        await conn.close()
    await db.migrate(dsn)
    pool = await db.create_pool(dsn, min_size=1, max_size=1)
    queries = Queries()
    async with pool.acquire() as pooled:
        pooled.add_query_logger(queries)
        role = await pooled.fetchval("SELECT current_user")
    store = LogStore(pool)
    try:
        await store.append([card(keys.SigningKey.generate(), "first", "0" * 32)])
        queries.take()
        await store.append([card(keys.SigningKey.generate(), "second", "1" * 32)])
        assert calls(queries.take()) == ["append_new"]
    finally:
        await pool.close()
    if role != "trustscore_app":
        pytest.skip(f"the pool connects as {role}, not as the app role")


async def test_a_cards_key_is_checked_by_index_however_small_the_log_was_when_the_check_was_planned(
    dsn: str,
) -> None:
    """Migration 0025: the check of a new key's entry is planned once per connection, not at every call.
    A plan made for a log of a few entries may not be a scan of the partition (the cheaper plan then),
    or every card after it would read the whole partition as the log grew. The call gives the session
    its planner settings back."""
    await db.migrate(dsn)
    pool = await db.create_pool(dsn, min_size=1, max_size=1)  # one connection: one plan cache
    store = LogStore(pool)
    scans = "SELECT seq_scan, idx_scan FROM pg_stat_xact_user_tables WHERE relname = 'entries_p0'"
    settings = "SELECT current_setting('plan_cache_mode'), current_setting('enable_seqscan')"
    try:
        for n in range(6):  # a tiny log; the plan is made at the first card's check
            await store.append([card(keys.SigningKey.generate(), f"small {n}", f"{n:032x}")])
        size = await store.sequenced_size()
        async with pool.acquire() as conn, conn.transaction():  # the log grows by 2,000 entries
            await add_entries(conn, size, 2_000, kind="filler")
            await conn.execute("UPDATE log_sequence SET next_index = $1", size + 2_000)
        key = keys.SigningKey.generate()
        big = card(key, "big", "f" * 32)
        async with pool.acquire() as conn, conn.transaction():
            before = await conn.fetchrow(scans)
            start = await conn.fetchval(APPEND_NEW, *append_new_arguments([big], store.partitions.covered))
            after = await conn.fetchrow(scans)
            restored = await conn.fetchrow(settings)
        assert start == size + 2_000
        assert before is not None and after is not None and restored is not None
        assert tuple(restored) == ("force_custom_plan", "on")
        assert after["seq_scan"] == before["seq_scan"], "the key's check read the whole partition"
        assert after["idx_scan"] > before["idx_scan"]
        assert await store.key_entry(key.id) == (key.public_key, start)
    finally:
        await pool.close()


@pytest.mark.parametrize("partitions", [GENERIC_CHECKS_UP_TO, GENERIC_CHECKS_UP_TO + 1])
async def test_past_the_limit_a_cards_key_check_is_planned_for_its_partition(
    dsn: str, partitions: int
) -> None:
    """As db.checked_inserts (test_checked_inserts.py): up to the limit the key's check has one plan,
    which locks every partition of entries; past it, the check and the insert lock the one they use."""
    await entries_with_partitions(dsn, partitions)
    owned = await owner(dsn)
    try:
        await owned.execute("UPDATE log_sequence SET next_index = $1", SPAN)
    finally:
        await owned.close()
    pool = await db.create_pool(dsn, min_size=1, max_size=1)
    try:
        async with pool.acquire() as conn, conn.transaction():
            key = keys.SigningKey.generate()
            arguments = append_new_arguments([card(key, "one", "1" * 32)], partitions * SPAN)
            assert await conn.fetchval(APPEND_NEW, *arguments) == SPAN
            locked = await conn.fetchval(ENTRY_PARTITION_LOCKS)
            assert await conn.fetchval("SHOW plan_cache_mode") == "force_custom_plan"
    finally:
        await pool.close()
    assert locked == (partitions if partitions <= GENERIC_CHECKS_UP_TO else 1)


async def test_key_arrays_of_unequal_lengths_are_refused_as_before(logged: tuple[LogStore, Queries]) -> None:
    """Migration 0025 skips its key insert when no key is new; arrays the caller never builds (more
    public keys than ids; no ids at all beside public keys) must still be refused as 0022 refused them:
    the padded NULL id violates keys.id NOT NULL, and nothing is written."""
    store, _ = logged
    key = keys.SigningKey.generate()
    await store.append([card(key, "registered", "r" * 32)])
    size = await store.sequenced_size()
    for ids in ([key.id], None):
        arguments = append_new_arguments(
            [card(key, "update", f"{len(ids or [])}" * 32)], store.partitions.covered
        )
        arguments[8:14] = [ids, [key.public_key] * 2, [0, 0], ["agent"] * 2, [None] * 2, ["[]"] * 2]
        async with store.pool.acquire() as conn:
            with pytest.raises(asyncpg.NotNullViolationError):
                await conn.fetchval(APPEND_NEW, *arguments)
    assert await store.sequenced_size() == size
