"""A group and the entries that follow it (a report and its graded evidence) are written together, and
a few entries by one statement; whatever the log already holds, the results and the rows written must be
those of the one-by-one path (a savepoint, the side tables, a COPY; then the same for what follows)."""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import pytest

from tests.helpers import new_card
from tests.integration.store.test_group_commit import card, checked
from trustscore.errors import Conflict, NonceReplay
from trustscore.ledger import keys
from trustscore.ledger.submission import CheckedEntry
from trustscore.store import log as store_log
from trustscore.store.log import Appended, Follow, LogStore

# The rows an append wrote at or after $1, each table in a fixed order.
_ROWS = (
    "SELECT idx, leaf, leaf_hash, statement_hash, signer, nonce, kind, subject FROM entries WHERE idx >= $1 "
    "ORDER BY idx",
    "SELECT statement_hash, idx FROM entry_statements WHERE idx >= $1 ORDER BY idx",
    "SELECT signer, nonce, idx FROM entry_nonces WHERE idx >= $1 ORDER BY idx",
    "SELECT id, public_key, first_idx, kind, controller, roles FROM keys WHERE first_idx >= $1 ORDER BY id",
)


async def outcome(
    store: LogStore, entries: Sequence[CheckedEntry], follow: Follow | None, *, together: bool = True
) -> object:
    """What LogStore._append_followed answers and writes, in a transaction rolled back afterwards."""
    async with store.pool.acquire() as conn:
        tr = conn.transaction()
        await tr.start()
        try:
            start = await conn.fetchval("SELECT next_index FROM log_sequence FOR UPDATE")
            try:
                out, after = await LogStore._append_followed(
                    conn, store.partitions.room(), entries, follow, start, together=together
                )
            except Exception as exc:
                return type(exc).__name__, str(exc)
            rows = [[tuple(r) for r in await conn.fetch(q, start)] for q in _ROWS]
            return [(a.index, a.leaf_hash, a.duplicate) for a in out], after - start, rows
        finally:
            await tr.rollback()


async def test_every_mix_of_new_logged_and_replayed_answers_as_one_by_one(
    store: LogStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent, server = keys.SigningKey.generate(), keys.SigningKey.generate()
    logged = card(agent, "logged", "l" * 32)
    await store.append([logged, card(server, "server", "s" * 32)])
    fresh, other = card(agent, "fresh", "f" * 32), checked(new_card("other")[1])
    replay = card(agent, "replay", "l" * 32)  # a new statement with a logged nonce
    groups: dict[str, list[CheckedEntry]] = {
        "fresh": [fresh],
        "logged": [logged],
        "replay": [replay],
        "fresh twice": [fresh, fresh],
        "fresh and other": [fresh, other],
        "logged and fresh": [logged, fresh],
        "nonce twice": [fresh, card(agent, "again", "f" * 32)],
    }

    def evidence(first: list[Appended]) -> list[CheckedEntry]:  # points at the first result's index
        return [card(server, f"evidence of {first[0].index}", f"{first[0].index:032d}")]

    def refusing(first: list[Appended]) -> list[CheckedEntry]:
        if first[0].duplicate:
            raise Conflict(f"this report is already in the log as entry {first[0].index}")
        return evidence(first)

    follows: dict[str, Follow | None] = {
        "none": None,
        "nothing": lambda first: [],
        "evidence": evidence,
        "refusing": refusing,
        "the same statement": lambda first: [fresh],
        "the logged statement": lambda first: [logged],
        "a logged nonce": lambda first: [card(server, "replayed", "s" * 32)],
        "the group's nonce": lambda first: [card(agent, "follower", "f" * 32)],
        "evidence twice": lambda first: evidence(first) + evidence(first),
    }
    for (g, entries), (f, follow) in itertools.product(groups.items(), follows.items()):
        together = await outcome(store, entries, follow)
        with monkeypatch.context() as m:
            m.setattr(store_log, "_ONE_STATEMENT_ROWS", 0)  # always the savepoint and the COPY
            one_by_one = await outcome(store, entries, follow, together=False)
        assert together == one_by_one, (g, f)


async def test_a_report_and_its_evidence_are_written_in_one_go(store: LogStore) -> None:
    agent, server = keys.SigningKey.generate(), keys.SigningKey.generate()
    report = card(agent, "report", "r" * 32)

    def evidence(first: list[Appended]) -> list[CheckedEntry]:
        return [card(server, f"evidence of {first[0].index}", "e" * 32)]

    start = await store.sequenced_size()
    async with store.pool.acquire() as conn, conn.transaction():
        await conn.execute("SELECT 1 FROM log_sequence FOR UPDATE")
        written = await LogStore._append_together(conn, store.partitions.room(), [report], evidence, start)
        assert written is not None
        out, after = written
        assert [(a.index, a.duplicate) for a in out] == [(start, False), (start + 1, False)]
        # Anything already in the log, and the one write is not tried: the one-by-one path answers.
        assert (
            await LogStore._append_together(conn, store.partitions.room(), [report], evidence, after) is None
        )
        await conn.execute("UPDATE log_sequence SET next_index = $1", after)
    assert [e.leaf for e in await store.entries(start, start + 2)] == [report.leaf, evidence(out[:1])[0].leaf]


@pytest.mark.parametrize("rows", [1, 2, 256, 257, 1000])
async def test_one_statement_or_a_copy_write_the_same_rows(
    store: LogStore, monkeypatch: pytest.MonkeyPatch, rows: int
) -> None:
    """Around the threshold of _ONE_STATEMENT_ROWS: new cards, then the same batch with one new card."""
    batch = [card(keys.SigningKey.generate(), f"c{i}", f"{i:032d}") for i in range(rows)]
    for entries in (batch, [*batch, checked(new_card("y")[1])]):
        one = await outcome(store, entries, None)
        with monkeypatch.context() as m:
            m.setattr(store_log, "_ONE_STATEMENT_ROWS", 0)
            copied = await outcome(store, entries, None)
        assert one == copied
        await store.append(batch)


async def test_queued_groups_with_follow_entries_answer_as_if_alone(store: LogStore) -> None:
    """Reports that queue up behind a commit: written under one savepoint when all succeed, one by one
    (each under its own) when one fails; either way what appending them one by one would give."""
    agent, server = keys.SigningKey.generate(), keys.SigningKey.generate()
    logged = card(agent, "logged", "l" * 32)
    await store.append([logged])

    def evidence(first: list[Appended]) -> list[CheckedEntry]:
        if first[0].duplicate:
            raise Conflict(f"this report is already in the log as entry {first[0].index}")
        return [card(server, f"evidence of {first[0].index}", f"{first[0].index:032d}")]

    a, b, c = (card(agent, n, n * 32) for n in "abc")
    start = await store.sequenced_size()
    results = await store.append_groups([([a], evidence), ([b], None), ([c], evidence)])
    assert [[(x.index, x.duplicate) for x in r] for r in results if not isinstance(r, Exception)] == [
        [(start, False), (start + 1, False)],
        [(start + 2, False)],
        [(start + 3, False), (start + 4, False)],
    ]
    replay = card(agent, "replay", "l" * 32)
    d, e = (card(agent, n, n * 32) for n in "de")
    start += 5
    results = await store.append_groups(
        [([d], evidence), ([replay], evidence), ([a], evidence), ([e], evidence)]
    )
    assert isinstance(results[1], NonceReplay) and "already used" in str(results[1])
    assert isinstance(results[2], Conflict) and f"entry {start - 5}" in str(results[2])
    assert [
        [(x.index, x.duplicate) for x in r] for r in (results[0], results[3]) if not isinstance(r, Exception)
    ] == [
        [(start, False), (start + 1, False)],
        [(start + 2, False), (start + 3, False)],
    ]
    assert await store.sequenced_size() == start + 4
    leaves = [x.leaf for x in await store.entries(start, start + 4)]
    assert leaves == [
        d.leaf,
        evidence([Appended(start, b"", False)])[0].leaf,
        e.leaf,
        evidence([Appended(start + 2, b"", False)])[0].leaf,
    ]
