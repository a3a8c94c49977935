"""The one-statement append and the together-write under concurrency: several "processes" (own
pools and stores) append queued groups, with and without follow entries, drawn from a small pool of
statements so that resubmissions, replayed nonces and reports whose evidence is refused collide across
processes, inside one queue and inside one batch, on partitions of SPAN indexes. Whatever interleaving
happens, the log must stay a log: contiguous indexes, each statement and (signer, nonce) once, side
tables in step with entries, every answer naming the entry that holds its statement."""

from __future__ import annotations

import asyncio
import random

import asyncpg
import pytest
from asyncpg.transaction import Transaction

from tests.integration.store.test_group_commit import card
from tests.integration.store.test_partitions import SPAN, VERIFIER, migrate_with_span, owner, sign
from trustscore.errors import Conflict, NonceReplay
from trustscore.ledger import keys
from trustscore.ledger.submission import CheckedEntry
from trustscore.services.audit import fsck_database
from trustscore.store import db
from trustscore.store.log import Appended, Follow, LogStore

SERVER = keys.SigningKey.from_seed(b"\x42" * 32)
AGENTS = [keys.SigningKey.from_seed(bytes([i + 1]) * 32) for i in range(3)]
# Two names per nonce: the second is a replay of the first's nonce whichever lands first.
POOL = [card(a, f"{a.id[:6]}-{name}", f"{n:032d}") for a in AGENTS for n in range(6) for name in "xy"]


def evidence(first: list[Appended]) -> list[CheckedEntry]:
    """The server's statement about a report: refused for a resubmission, as intake refuses it."""
    if first[0].duplicate:
        raise Conflict(f"already in the log as entry {first[0].index}")
    return [card(SERVER, f"evidence of {first[0].index}", f"{first[0].index:032d}")]


async def invariants(conn: asyncpg.Connection) -> int:
    n: int = await conn.fetchval("SELECT next_index FROM log_sequence")
    idx = [r["idx"] for r in await conn.fetch("SELECT idx FROM entries ORDER BY idx")]
    assert idx == list(range(n))
    assert await conn.fetchval("SELECT count(*) FROM entry_statements") == n
    assert await conn.fetchval("SELECT count(*) FROM entry_nonces") == n
    assert (
        await conn.fetchval(
            "SELECT count(*) FROM entries e JOIN entry_statements s USING (idx, statement_hash) "
            "JOIN entry_nonces o USING (idx, signer, nonce)"
        )
        == n
    )
    assert await conn.fetchval("SELECT count(DISTINCT (signer, nonce)) FROM entries") == n
    assert await conn.fetchval("SELECT count(DISTINCT statement_hash) FROM entries") == n
    return n


async def hold_nonce(other: asyncpg.Connection, entry: CheckedEntry) -> Transaction:
    """A transaction of ``other``, left open, that has taken ``entry``'s (signer, nonce) without the
    sequence lock (what no writer does today: the race the one-statement write must survive)."""
    tr = other.transaction()
    await tr.start()
    await other.execute(
        "INSERT INTO entry_nonces (signer, nonce, idx) VALUES ($1, $2, 1000000)", entry.signer, entry.nonce
    )
    return tr


async def test_concurrent_queued_groups_keep_the_log_a_log(dsn: str) -> None:
    await migrate_with_span(dsn)
    pools = [await db.create_pool(dsn, min_size=1, max_size=2) for _ in range(4)]
    try:
        stores = [LogStore(p) for p in pools]
        # The server's own card first (its evidence is a card of its own key: nonces are its indexes).
        await stores[0].append([card(SERVER, "server", "s" * 32)])
        answers: list[tuple[CheckedEntry, Appended]] = []

        async def worker(store: LogStore, w: int) -> None:
            rng = random.Random(w)
            for _ in range(15):
                groups: list[tuple[list[CheckedEntry], Follow | None]] = []
                for _ in range(rng.randint(1, 4)):
                    entries = (
                        rng.sample(POOL, rng.randint(1, 3)) if rng.random() < 0.5 else [rng.choice(POOL)]
                    )
                    if rng.random() < 0.2:
                        entries = entries + entries[:1]  # the same statement twice in one batch
                    groups.append((entries, evidence if len(entries) == 1 and rng.random() < 0.6 else None))
                try:
                    results = await store.append_groups(groups)
                except (NonceReplay, Conflict) as exc:  # one group alone raises (append_groups)
                    assert len(groups) == 1
                    results = [exc]
                for (entries, follow), r in zip(groups, results, strict=True):
                    if isinstance(r, Exception):
                        assert isinstance(r, (NonceReplay, Conflict)), r
                        continue
                    assert len(r) == len(entries) + (1 if follow else 0)
                    answers.extend(zip(entries, r, strict=False))
                    if follow is not None:
                        assert r[1].index == r[0].index + 1 and not r[1].duplicate

        await asyncio.gather(*(worker(s, w) for w, s in enumerate(stores)))
        conn = await owner(dsn)
        try:
            n = await invariants(conn)
            held = {
                bytes(r["statement_hash"]): r["idx"]
                for r in await conn.fetch("SELECT statement_hash, idx FROM entries")
            }
        finally:
            await conn.close()
        assert n > 2 * SPAN
        for entry, answer in answers:
            assert held[entry.statement_hash] == answer.index
        await stores[0].integrate(sign, max_batch=10_000)
    finally:
        for p in pools:
            await p.close()
    report = await fsck_database(dsn, VERIFIER, batch=50)
    assert report.clean and report.root_matches, report.problems


async def test_a_nonce_taken_without_the_sequence_lock_is_still_a_replay(store: LogStore, dsn: str) -> None:
    """The one-statement insert has no savepoint: when its probe misses a (signer, nonce) that another
    session writes meanwhile (only a writer that skips the sequence lock can), its unique violation
    aborts the whole transaction, and the fallback's lookup then fails on the aborted transaction
    (InFailedSQLTransactionError, a 500) where the savepoint path answered NonceReplay (pre-7a2db75)."""
    entry = card(AGENTS[0], "raced", "r" * 32)
    other = await owner(dsn)
    try:
        tr = await hold_nonce(other, entry)
        appending = asyncio.create_task(store.append([entry]))
        await asyncio.sleep(0.5)  # the append's insert now waits on the uncommitted nonce
        await tr.commit()
        with pytest.raises(NonceReplay):
            await appending
    finally:
        await other.close()


async def test_a_nonce_taken_without_the_sequence_lock_fails_only_its_queued_group(
    store: LogStore, dsn: str
) -> None:
    """As above with two queued groups: the raced one is a replay, the other is appended."""
    entry, fine = card(AGENTS[0], "raced", "r" * 32), card(AGENTS[1], "fine", "f" * 32)
    other = await owner(dsn)
    try:
        tr = await hold_nonce(other, entry)
        start = await store.sequenced_size()
        appending = asyncio.create_task(store.append_groups([([fine], None), ([entry], None)]))
        await asyncio.sleep(0.5)
        await tr.commit()
        first, second = await appending
    finally:
        await other.close()
    assert isinstance(second, NonceReplay), second
    assert not isinstance(first, Exception) and [(a.index, a.duplicate) for a in first] == [(start, False)]
    assert await store.sequenced_size() == start + 1


async def test_a_statement_timeout_mid_write_fails_its_group_alone(dsn: str) -> None:
    """A queued group whose one-statement insert is cancelled (statement_timeout, waiting on a nonce
    another session holds uncommitted) fails alone; the group queued with it is written, the log stays
    contiguous and the side tables in step."""
    await db.migrate(dsn)
    pool = await db.create_pool(dsn + ("&" if "?" in dsn else "?") + "statement_timeout=400", min_size=1)
    store = LogStore(pool)
    blocked, fine = card(AGENTS[0], "blocked", "b" * 32), card(AGENTS[1], "fine", "f" * 32)
    other = await owner(dsn)
    try:
        tr = await hold_nonce(other, blocked)
        start = await store.sequenced_size()
        first, second = await store.append_groups([([fine], evidence), ([blocked], evidence)])
        await tr.rollback()
        assert isinstance(second, asyncpg.QueryCanceledError), second
        assert not isinstance(first, Exception)
        assert [(a.index, a.duplicate) for a in first] == [(start, False), (start + 1, False)]
        assert await invariants(other) == start + 2
        # Once the other session is gone, the same group is appended as if nothing had happened.
        [again] = await store.append_groups([([blocked], evidence)])
        assert not isinstance(again, Exception) and [a.index for a in again] == [start + 2, start + 3]
        assert await invariants(other) == start + 4
    finally:
        await other.close()
        await pool.close()
