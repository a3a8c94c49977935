"""Groups with follow entries (a report and its graded evidence) in one call at an expected index
(migration 0026, LogStore._append_new_followed). The follow entries name the indexes of their group and
are signed, so they are made for the index the store expects before anything is locked; the call writes
only if that is the log's next index. The attack: another writer moves the log on in between, and
evidence naming the wrong report would enter the log."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Sequence
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import pytest

from tests.integration.store.conftest import Queries
from tests.integration.store.test_group_commit import card
from trustscore.errors import Conflict
from trustscore.ledger import keys
from trustscore.ledger.submission import CheckedEntry
from trustscore.store import db
from trustscore.store import log as store_log
from trustscore.store.log import APPEND_NEW_AT, Appended, Follow, LogStore, append_new_arguments

SERVER = keys.SigningKey.generate()
NEW_KEY = keys.SigningKey.generate()  # registered by a follow entry


def evidence(first: list[Appended]) -> list[CheckedEntry]:
    """Statements naming the index of the group's first entry, as graded evidence names its report."""
    return [card(SERVER, f"evidence of {first[0].index}", f"{first[0].index:032d}")]


def refusing(first: list[Appended]) -> list[CheckedEntry]:
    """The report's follow: a report already in the log is refused (Intake._report)."""
    if first[0].duplicate:
        raise Conflict(f"this report is already in the log as entry {first[0].index}")
    return evidence(first)


def kinds_of(sent: list[str]) -> list[str]:
    out = []
    for q in sent:
        if "trustscore_append_new_at" in q:
            out.append("append_new_at")
        elif "trustscore_append_new" in q:
            out.append("append_new")
        else:
            out.append(q.split()[0])
    return out


async def test_a_report_and_its_evidence_are_one_call(logged: tuple[LogStore, Queries]) -> None:
    store, queries = logged
    start = await store.sequenced_size()
    queries.take()
    report = card(keys.SigningKey.generate(), "report", "r" * 32)
    [out] = await store.append_groups([([report], refusing)])
    assert not isinstance(out, Exception)
    assert [(a.index, a.duplicate) for a in out] == [(start, False), (start + 1, False)]
    assert kinds_of(queries.take()) == ["append_new_at"]  # no BEGIN, no lock, no COMMIT of the client's
    stored = await store.entries(start, start + 2)
    assert [e.leaf for e in stored] == [report.leaf, evidence(out[:1])[0].leaf]
    # Several reports queued behind a commit: one call for all, each evidence naming its own report.
    reports = [card(keys.SigningKey.generate(), f"report {i}", f"{i:032d}") for i in range(3)]
    queries.take()
    results = await store.append_groups([([r], refusing) for r in reports])
    assert kinds_of(queries.take()) == ["append_new_at"]
    at = start + 2
    for r, result in zip(reports, results, strict=True):
        assert not isinstance(result, Exception)
        assert [a.index for a in result] == [at, at + 1]
        assert [e.leaf for e in await store.entries(at, at + 2)] == [r.leaf, evidence(result[:1])[0].leaf]
        at += 2
    assert await store.sequenced_size() == at


async def test_another_writer_in_between_moves_the_evidence_with_the_report(
    logged: tuple[LogStore, Queries], dsn: str
) -> None:
    """The attack: the store expects index n, another process appends there first. Nothing may be written
    for n; the evidence is made again for the report's true index. Misses in a row then make the store
    go the general way for longer before it tries the call again."""
    store, queries = logged
    other = LogStore(await db.create_pool(dsn, min_size=1, max_size=1))
    made: list[int] = []

    def follow(first: list[Appended]) -> list[CheckedEntry]:
        made.append(first[0].index)
        return refusing(first)

    def report(i: int) -> CheckedEntry:
        return card(keys.SigningKey.generate(), f"report {i}", f"{i:032d}")

    try:
        [moved] = await other.append([card(keys.SigningKey.generate(), "meanwhile", "m" * 32)])
        queries.take()
        first = report(0)
        [out] = await store.append_groups([([first], follow)])
        assert not isinstance(out, Exception)
        assert [a.index for a in out] == [moved.index + 1, moved.index + 2]
        assert made == [moved.index, moved.index + 1]  # made for the hint, then by the general path
        sent = kinds_of(queries.take())
        assert sent[0] == "append_new_at" and "BEGIN;" in sent
        stored = await store.entries(moved.index, moved.index + 3)
        assert [e.leaf for e in stored[1:]] == [first.leaf, evidence(out[:1])[0].leaf]
        assert b"evidence of %d" % moved.index not in b"".join(e.leaf for e in stored)
        # One miss: the next group goes the general way without trying, the one after is one call again.
        await store.append_groups([([report(1)], follow)])
        assert "append_new_at" not in kinds_of(queries.take())
        await store.append_groups([([report(2)], follow)])
        assert kinds_of(queries.take()) == ["append_new_at"]
        # Two misses in a row: three groups the general way before the next try.
        for i, tries in ((3, True), (4, False), (5, True), (6, False), (7, False), (8, False), (9, True)):
            if tries:
                await other.append([card(keys.SigningKey.generate(), f"meanwhile {i}", "m" * 32)])
                queries.take()
            [out] = await store.append_groups([([report(i)], follow)])
            assert not isinstance(out, Exception)
            assert ("append_new_at" in kinds_of(queries.take())) == tries, i
            leaves = [e.leaf for e in await store.entries(out[0].index, out[1].index + 1)]
            assert leaves[1] == evidence(out[:1])[0].leaf  # each evidence names its own report
    finally:
        await other.pool.close()


async def test_a_writer_holding_the_lock_when_the_call_starts(
    logged: tuple[LogStore, Queries], dsn: str
) -> None:
    """Another writer has taken the sequence row and moved the index, not yet committed, when the call
    starts: the call must wait for it and compare with the index it committed, not the one before
    (found by review: without the lock taken before the comparison, the evidence named that writer's
    entry)."""
    store, _ = logged
    start = await store.sequenced_size()
    other = await asyncpg.connect(dsn)
    meanwhile = card(keys.SigningKey.generate(), "meanwhile", "m" * 32)
    try:
        tr = other.transaction()
        await tr.start()
        assert await other.fetchval("SELECT next_index FROM log_sequence FOR UPDATE") == start
        await other.execute(
            "WITH s AS (INSERT INTO entry_statements VALUES ($2, $1)), o AS (INSERT INTO entry_nonces "
            "VALUES ($3, $4, $1)) INSERT INTO entries (idx, leaf, leaf_hash, statement_hash, signer, nonce, "
            "kind, subject) VALUES ($1, $5, $6, $2, $3, $4, $7, $8)",
            start,
            meanwhile.statement_hash,
            meanwhile.signer,
            meanwhile.nonce,
            meanwhile.leaf,
            meanwhile.leaf_hash,
            meanwhile.kind,
            meanwhile.subject,
        )
        await other.execute("UPDATE log_sequence SET next_index = $1", start + 1)
        report = card(keys.SigningKey.generate(), "report", "r" * 32)
        task = asyncio.create_task(store.append_groups([([report], refusing)]))
        await asyncio.sleep(0.5)
        assert not task.done()  # waits for the lock
        await tr.commit()
        [out] = await task
    finally:
        await other.close()
    assert not isinstance(out, Exception)
    assert [a.index for a in out] == [start + 1, start + 2]
    stored = await store.entries(start, start + 3)
    assert [e.leaf for e in stored] == [meanwhile.leaf, report.leaf, evidence(out[:1])[0].leaf]


async def test_reports_as_the_app_role_where_functions_are_not_public(dsn: str) -> None:
    """A hardened server revokes EXECUTE on new functions from PUBLIC by default: migration 0026 grants
    its function to the app role, or every report would be refused (found by review)."""
    await db.migrate(dsn, until=21)
    admin = await asyncpg.connect(dsn)
    login = "ts_app_" + secrets.token_hex(4)
    try:
        await admin.execute("ALTER DEFAULT PRIVILEGES REVOKE EXECUTE ON FUNCTIONS FROM PUBLIC")
        await db.migrate(dsn)
        await admin.execute(f"CREATE ROLE {login} LOGIN IN ROLE trustscore_app")
        await admin.execute(f"ALTER ROLE {login} SET role = 'trustscore_app'")
        parts = urlsplit(dsn)
        netloc = f"{login}@{parts.netloc.rpartition('@')[2]}"  # the embedded server's host is in the query
        app_dsn = urlunsplit((parts.scheme, netloc, parts.path, parts.query, ""))
        pool = await db.create_pool(app_dsn, min_size=1, max_size=1)
        queries = Queries()
        try:
            async with pool.acquire() as conn:
                assert await conn.fetchval("SELECT current_user") == "trustscore_app"
                conn.add_query_logger(queries)
            store = LogStore(pool)
            await store.append([card(keys.SigningKey.generate(), "first", "0" * 32)])
            queries.take()
            [out] = await store.append_groups(
                [([card(keys.SigningKey.generate(), "report", "r" * 32)], refusing)]
            )
            assert not isinstance(out, Exception)
            assert kinds_of(queries.take()) == ["append_new_at"]
        finally:
            await pool.close()
    finally:
        await admin.execute(f"DROP OWNED BY {login}")
        await admin.execute(f"DROP ROLE {login}")
        await admin.close()


async def test_the_call_writes_nothing_at_an_index_not_expected(store: LogStore) -> None:
    await store.append([card(keys.SigningKey.generate(), "first", "0" * 32)])
    start = await store.sequenced_size()
    entries = [card(keys.SigningKey.generate(), "new", "n" * 32)]
    arguments = append_new_arguments(entries, store.partitions.covered)
    async with store.pool.acquire() as conn:
        for wrong in (start - 1, start + 1, -1, 0):
            assert await conn.fetchval(APPEND_NEW_AT, wrong, *arguments) == -1 - start
        assert await conn.fetchval("SELECT count(*) FROM entries WHERE idx >= $1", start) == 0
        assert await conn.fetchval(APPEND_NEW_AT, start, *arguments) == start
    assert await store.sequenced_size() == start + 1


_ROWS = (
    "SELECT idx, leaf, leaf_hash, statement_hash, signer, nonce, kind, subject FROM entries ORDER BY idx",
    "SELECT statement_hash, idx FROM entry_statements ORDER BY idx",
    "SELECT signer, nonce, idx FROM entry_nonces ORDER BY idx",
    "SELECT id, public_key, first_idx, kind, controller, roles FROM keys ORDER BY id",
    "SELECT next_index FROM log_sequence",
)


def answer(results: Sequence[list[Appended] | Exception]) -> list[object]:
    return [
        (type(r).__name__, str(r)) if isinstance(r, Exception) else [(a.index, a.duplicate) for a in r]
        for r in results
    ]


async def test_every_mix_answers_and_writes_as_the_general_path(
    dsn: str, other_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The same appends on two logs, one with the call and one without (the general path): every answer
    and every row the same, with other writers in between and the follow entries' contents depending on
    the indexes they are given."""
    agent, fresh_key = keys.SigningKey.generate(), keys.SigningKey.generate()
    logged = card(agent, "logged", "l" * 32)
    replay = card(agent, "replay", "l" * 32)  # a new statement with a logged nonce

    def fresh(i: int) -> CheckedEntry:
        return card(fresh_key, f"fresh {i}", f"f{i:031d}")

    follows: dict[str, Follow | None] = {
        "none": None,
        "nothing": lambda first: [],
        "evidence": evidence,
        "refusing": refusing,
        "raising": lambda first: [][0],
        "the group's statement": lambda first: [logged],
        "a logged nonce": lambda first: [card(agent, "follower", "l" * 32)],
        "a key's card": lambda first: [card(NEW_KEY, f"key {first[0].index}", f"k{first[0].index:031d}")],
        "evidence twice": lambda first: evidence(first) + evidence(first),
    }
    cases: list[list[tuple[list[CheckedEntry], str]]] = []
    for i, name in enumerate(follows):
        cases += [
            [([fresh(2 * i)], name)],
            [([logged], name)],
            [([replay], name)],
            [([fresh(2 * i + 1)], "evidence"), ([fresh(2 * i + 1)], name)],  # the second: the first's
            [([card(keys.SigningKey.generate(), f"a {i}", "a" * 32)], name), ([logged], "refusing")],
        ]
    between = [card(keys.SigningKey.generate(), f"between {i}", "b" * 32) for i in range(len(cases))]
    seen: dict[str, list[object]] = {}
    for label, url, enabled in (("call", dsn, True), ("general", other_dsn, False)):
        await db.migrate(url)
        pool = await db.create_pool(url, min_size=1, max_size=2)
        other = await db.create_pool(url, min_size=1, max_size=1)
        store = LogStore(pool)
        answers: list[object] = []
        try:
            with monkeypatch.context() as m:
                if not enabled:
                    m.setattr(LogStore, "_append_new_followed", _never)
                await store.append([logged])
                for i, groups in enumerate(cases):
                    store._skip = 0  # every case tries the call, whatever missed before
                    if i % 3 == 0:  # another process moves the log on: this store's hint is stale
                        await LogStore(other).append([between[i]])
                    try:
                        results = await store.append_groups(
                            [(entries, follows[name]) for entries, name in groups]
                        )
                    except Exception as exc:  # one group's error is raised, not returned
                        answers.append(("raised", type(exc).__name__, str(exc)))
                    else:
                        answers.append(answer(results))
            async with pool.acquire() as conn:
                answers.append([[tuple(r) for r in await conn.fetch(q)] for q in _ROWS])
        finally:
            await pool.close()
            await other.close()
        seen[label] = answers
    assert len(seen["call"]) == len(cases) + 1
    for i, (a, b) in enumerate(zip(seen["call"], seen["general"], strict=True)):
        assert a == b, (i, cases[i] if i < len(cases) else "rows")
    assert any(isinstance(x, list) and len(x) == 2 for x in seen["call"][:-1])  # some written together


async def _never(self: LogStore, groups: object) -> None:
    return None


async def test_the_general_path_is_used_for_what_the_call_cannot_write(
    logged: tuple[LogStore, Queries], monkeypatch: pytest.MonkeyPatch
) -> None:
    store, queries = logged
    report = card(keys.SigningKey.generate(), "report", "r" * 32)
    await store.append_groups([([report], refusing)])
    queries.take()
    # The report again: the call finds its statement logged and writes nothing; the general path answers.
    with pytest.raises(Conflict, match="already in the log"):
        await store.append_groups([([report], refusing)])
    sent = kinds_of(queries.take())
    assert sent[0] == "append_new_at" and "BEGIN;" in sent
    # More rows than one call takes: the general path, not the call.
    monkeypatch.setattr(store_log, "_ONE_STATEMENT_ROWS", 1)
    [out] = await store.append_groups([([card(keys.SigningKey.generate(), "big", "b" * 32)], refusing)])
    assert not isinstance(out, Exception)
    assert "append_new_at" not in kinds_of(queries.take())
