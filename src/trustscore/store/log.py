"""The log's SQL: sequencing appends, keys, Merkle nodes and checkpoints.

Appending takes the sequence row lock, so concurrent appenders get contiguous indexes and a statement
submitted twice, even concurrently, maps to one entry. Integration runs under an advisory lock so only
one integrator in the whole deployment extends the tree and signs checkpoints.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from dataclasses import dataclass

import asyncpg

from trustscore.errors import InvalidInput, NonceReplay
from trustscore.kinds.admission import Registration, registration_of
from trustscore.ledger import merkle, tiles
from trustscore.ledger.audit import Columns
from trustscore.ledger.submission import CheckedEntry
from trustscore.store.db import checked_inserts
from trustscore.store.partitions import Partitions, Room

# Unique constraints that appends rely on: the side tables of migrations/0017_partitions.sql hold the
# log's global uniqueness (a partitioned table's unique indexes must include its partition key, idx).
_STATEMENT_CONSTRAINT = "entry_statements_pkey"  # a statement is logged once
_KEYS_CONSTRAINT = "keys_pkey"  # keys.id PRIMARY KEY
_KEY_COLUMNS = ["id", "public_key", "first_idx", "kind", "controller", "roles"]
_NONCE_CONSTRAINT = "entry_nonces_pkey"  # a signer uses a nonce once

_INTEGRATOR_LOCK = 0x74726565  # advisory lock key held while integrating


@dataclass(frozen=True)
class Appended:
    index: int
    leaf_hash: bytes
    duplicate: bool


# The entries holding any of the statements with hashes $1 (the side table names the index, and the join
# on idx lets each probe of entries go to one partition).
_EXISTING = (
    "SELECT s.statement_hash, e.idx, e.leaf_hash FROM unnest($1::bytea[]) AS t(h) "
    "JOIN entry_statements s ON s.statement_hash = t.h JOIN entries e ON e.idx = s.idx"
)

# The index of the entry $1 made with nonce $2 (NULL: none). Asked of the side table alone: a join with
# the partitioned entries on a column not known at planning makes every custom plan consider every
# partition (planned per execution: db.py), so the per-report probe's cost grew with the log
# (bench/nonce_probe.py: 95-155 µs of PostgreSQL CPU at 2 partitions, 340-365 µs at 22; this 30-35 µs).
_NONCE_INDEX = "SELECT idx FROM entry_nonces WHERE signer = $1 AND nonce = $2"

# Per probe (signer, nonce, other signer, other nonce): the index of signer's entry with nonce, and
# whether other signer used other nonce; one row per probe, by its position (LogStore.nonce_probes).
_NONCE_PROBES = (
    "SELECT t.pos, (SELECT idx FROM entry_nonces WHERE signer = t.signer AND nonce = t.nonce) AS idx, "
    "EXISTS (SELECT 1 FROM entry_nonces WHERE signer = t.other_signer AND nonce = t.other_nonce) AS used "
    "FROM unnest($1::text[], $2::text[], $3::text[], $4::text[]) "
    "WITH ORDINALITY AS t(signer, nonce, other_signer, other_nonce, pos)"
)

#: A nonce probe: (signer, nonce) to find the entry of, (other signer, other nonce) to ask whether used.
NonceProbe = tuple[str, str, str, str]

# The pre-folded rows of the full hash tiles $1/$2 (levels, indexes) from the stored nodes that make them
# (migrations/0018_hash_tiles.sql): per height h of the tile's subtree, one index range scan of level
# 8L + h (the LIMIT keeps it a scan per height, as in node_runs). A tile missing a node gets a short or
# NULL row, which the table's constraints refuse.
_WRITE_TILES = (
    "INSERT INTO hash_tiles (level, idx, subtree) SELECT t.level, t.idx, ("
    "SELECT string_agg(n.hash, ''::bytea ORDER BY h.h, n.idx) FROM generate_series(0, 7) AS h(h) "
    "CROSS JOIN LATERAL (SELECT idx, hash FROM tree_nodes WHERE level = 8 * t.level + h.h "
    "AND idx >= (t.idx << 8) >> h.h AND idx < ((t.idx + 1) << 8) >> h.h ORDER BY idx LIMIT 256 >> h.h) n"
    ") FROM unnest($1::smallint[], $2::bigint[]) AS t(level, idx)"
)

# Lookups of many keys use unnest(...) JOIN rather than "= ANY(array)": when the planner's row
# estimates lag behind a growing table it may pick a sequential scan, and "= ANY" then compares every
# row with every array element (seconds per batch of 1000 at 50k entries); a join stays linear.

# Registers the keys $1..$6 (_KEY_COLUMNS; roles as a JSON array each) that are not registered yet;
# returns the ids it wrote. One round trip, no savepoint: a key already there is left as it is, and the
# caller compares it with the card that would register it again.
_INSERT_NEW_KEYS = (
    "INSERT INTO keys (id, public_key, first_idx, kind, controller, roles) "
    "SELECT id, public_key, first_idx, kind, controller, ARRAY(SELECT jsonb_array_elements_text(roles::jsonb)) "
    "FROM unnest($1::text[], $2::bytea[], $3::bigint[], $4::text[], $5::text[], $6::text[]) "
    "AS t(id, public_key, first_idx, kind, controller, roles) ON CONFLICT (id) DO NOTHING RETURNING id"
)

# A few new entries are written by one statement when none of their statements and nonces is in the log
# (one round trip, no savepoint: _insert_unless_known); more, or any already there, by a savepoint, an
# insert into the side tables and a COPY of the entries (whose unique violation says which is there).
_ONE_STATEMENT_ROWS = 256

# Writes the entries $1..$8 (ENTRY_COLUMNS) and their side-table rows unless one of their statements or
# (signer, nonce) is in the log already; whether it wrote. Appends hold the sequence row lock, so nothing
# else writes these tables between the probe and the inserts.
_INSERT_UNLESS_KNOWN = (
    "WITH new AS MATERIALIZED (SELECT * FROM unnest($1::bigint[], $2::bytea[], $3::bytea[], $4::bytea[], "
    "$5::text[], $6::text[], $7::text[], $8::text[]) AS t(idx, leaf, leaf_hash, statement_hash, signer, "
    "nonce, kind, subject)), "
    "known AS (SELECT EXISTS (SELECT 1 FROM new JOIN entry_statements s USING (statement_hash)) "
    "OR EXISTS (SELECT 1 FROM new JOIN entry_nonces n USING (signer, nonce)) AS yes), "
    "e AS (INSERT INTO entries (idx, leaf, leaf_hash, statement_hash, signer, nonce, kind, subject) "
    "SELECT * FROM new WHERE NOT (SELECT yes FROM known) RETURNING idx, statement_hash, signer, nonce), "
    "s AS (INSERT INTO entry_statements (statement_hash, idx) SELECT statement_hash, idx FROM e), "
    "n AS (INSERT INTO entry_nonces (signer, nonce, idx) SELECT signer, nonce, idx FROM e) "
    "SELECT NOT yes FROM known"
)


# LogStore._append_new: the entries' columns (ENTRY_COLUMNS but idx), the first index not covered by a
# partition, and the keys' columns (_KEY_COLUMNS with first_idx as a position in the batch; roles as a
# JSON array each). Migrations 0022 and 0025 say what the function does.
APPEND_NEW = (
    "SELECT trustscore_append_new($1::bytea[], $2::bytea[], $3::bytea[], $4::text[], $5::text[], $6::text[], "
    "$7::text[], $8::bigint, $9::text[], $10::bytea[], $11::bigint[], $12::text[], $13::text[], $14::text[])"
)


# LogStore._append_new_followed: APPEND_NEW at an expected first index (migration 0026): the start, NULL,
# or -1 - the log's next index when that is not the one expected (nothing written).
APPEND_NEW_AT = (
    "SELECT trustscore_append_new_at($1::bigint, $2::bytea[], $3::bytea[], $4::bytea[], $5::text[], "
    "$6::text[], $7::text[], $8::text[], $9::bigint, $10::text[], $11::bytea[], $12::bigint[], $13::text[], "
    "$14::text[], $15::text[])"
)


def append_new_arguments(entries: Sequence[CheckedEntry], covered: int) -> list[object]:
    """The arguments of ``trustscore_append_new`` (:data:`APPEND_NEW`) for ``entries``; InvalidInput if
    two cards register one key differently."""
    introduced = _introduced(enumerate(entries))
    columns = [list(c) for c in zip(*entry_records(enumerate(entries)), strict=True)][1:]
    keys = [
        (reg.id, reg.public_key, i, reg.kind, reg.controller, json.dumps(list(reg.roles)))
        for reg, i in introduced.values()
    ]
    key_columns = [list(c) for c in zip(*keys, strict=True)] if keys else [[] for _ in range(6)]
    return [*columns, covered, *key_columns]


async def _insert_unless_known(
    conn: asyncpg.pool.PoolConnectionProxy, new: list[tuple[int, CheckedEntry]]
) -> bool:
    """Write ``new`` in one statement if none of their statements and nonces is in the log or twice in
    ``new``; whether it wrote (if not, nothing was written and the transaction is intact)."""
    n = len(new)
    if len({e.statement_hash for _, e in new}) < n or len({(e.signer, e.nonce) for _, e in new}) < n:
        return False
    try:
        wrote: bool = await conn.fetchval(_INSERT_UNLESS_KNOWN, *zip(*entry_records(new), strict=True))
    except asyncpg.UniqueViolationError as exc:
        # The probe saw none of them, so a session without the sequence lock wrote one meanwhile; the
        # transaction is aborted (no savepoint here): the caller must start the append again.
        raise WrittenMeanwhile(str(exc)) from exc
    return wrote


def _introduced(new: Iterable[tuple[int, CheckedEntry]]) -> dict[str, tuple[Registration, int]]:
    """The keys that the cards among ``new`` (index or position, entry) register, each with the first
    card's index; InvalidInput if two cards register one key differently."""
    introduced: dict[str, tuple[Registration, int]] = {}
    for i, e in new:
        reg = registration_of(e.statement)
        if reg is None:
            continue
        first = introduced.setdefault(reg.id, (reg, i))[0]
        if (first.kind, first.controller, first.roles) != (reg.kind, reg.controller, reg.roles):
            raise InvalidInput(
                f"{reg.id} is registered twice in one commit with a different card type, controller or "
                "roles; they never change"
            )
    return introduced


def _distinct(entries: Sequence[CheckedEntry]) -> bool:
    """Whether no statement and no (signer, nonce) comes twice in ``entries``."""
    n = len(entries)
    return len({e.statement_hash for e in entries}) == n and len({(e.signer, e.nonce) for e in entries}) == n


def _planned(
    groups: Sequence[tuple[Sequence[CheckedEntry], Follow | None]], start: int
) -> tuple[list[CheckedEntry], list[list[Appended] | Exception]] | None:
    """Every entry of ``groups`` and each group's results, were every entry new and the first at
    ``start``: a group's entries, then what its follow makes of their results, group after group (as the
    general path writes them). None if a follow refuses (the general path calls it again, and says why)."""
    entries: list[CheckedEntry] = []
    results: list[list[Appended] | Exception] = []
    at = start
    for group, follow in groups:
        out = [Appended(at + k, e.leaf_hash, False) for k, e in enumerate(group)]
        entries += group
        at += len(group)
        if follow is not None:
            try:
                more = follow(out)
            except Exception:
                return None
            out = out + [Appended(at + k, e.leaf_hash, False) for k, e in enumerate(more)]
            entries += more
            at += len(more)
        results.append(out)
    return entries, results


class WrittenMeanwhile(Exception):
    """A statement or nonce appeared between the one-statement insert's probe and its insert."""


#: Makes the entries that must follow a group in the same transaction, from the group's results. It must
#: have no effects of its own: it may be called several times (the together-write, its fallback, a queued
#: batch redone group by group, a restarted append); only the call on the path that writes counts.
Follow = Callable[[list[Appended]], Sequence[CheckedEntry]]


#: The columns of an entry row as appends write them, and the rows of indexed entries.
ENTRY_COLUMNS = ["idx", "leaf", "leaf_hash", "statement_hash", "signer", "nonce", "kind", "subject"]


def entry_records(new: Iterable[tuple[int, CheckedEntry]]) -> list[tuple[object, ...]]:
    return [(i, e.leaf, e.leaf_hash, e.statement_hash, e.signer, e.nonce, e.kind, e.subject) for i, e in new]


@dataclass(frozen=True)
class StoredCheckpoint:
    size: int
    root: bytes
    signed_note: str


@dataclass(frozen=True)
class StoredEntry:
    index: int
    leaf: bytes
    leaf_hash: bytes


@dataclass(frozen=True)
class ListedEntry:
    """An entry as a list of entries names it: its kind, signer and subject, kept beside its leaf when it
    was appended (from the statement then verified), read without the leaf."""

    index: int
    kind: str  # the statement's predicate type
    signer: str
    subject: str


@dataclass(frozen=True)
class EntryHead:
    """What the log keeps beside an entry's leaf: enough to name it without reading or parsing the leaf."""

    index: int
    subject: str
    statement_hash: bytes


class LogStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool
        self.partitions = Partitions()
        # The log's next index as this store last wrote or saw it under the lock (None: not yet): the index
        # a group with follow entries is made for (_append_new_followed). Only a hint: another writer may
        # have moved it, which the call finds under the lock before it writes anything. After each miss
        # in a row, twice as many such groups (up to 63) go the general way before the call is tried again.
        self._next_hint: int | None = None
        self._misses = 0
        self._skip = 0

    async def registrations(self, ids: Iterable[str]) -> dict[str, Registration]:
        """What admission needs of each registered key among ``ids``."""
        wanted = sorted(set(ids))
        if not wanted:
            return {}
        rows = await self.pool.fetch(
            "SELECT k.id, k.public_key, k.kind, k.controller, k.roles FROM unnest($1::text[]) AS t(id) "
            "JOIN keys k ON k.id = t.id",
            wanted,
        )
        return {
            r["id"]: Registration(
                r["id"], bytes(r["public_key"]), r["kind"], r["controller"], tuple(r["roles"])
            )
            for r in rows
        }

    async def statement_index(self, statement_hash: bytes) -> int | None:
        """The index of the entry holding the statement with this hash, if any."""
        idx: int | None = await self.pool.fetchval(
            "SELECT idx FROM entry_statements WHERE statement_hash = $1", statement_hash
        )
        return idx

    async def existing(self, statement_hashes: Sequence[bytes]) -> dict[bytes, Appended]:
        """The entries already holding any of these statements (a resubmission gets its first index)."""
        if not statement_hashes:
            return {}
        rows = await self.pool.fetch(_EXISTING, list(statement_hashes))
        return {bytes(r["statement_hash"]): Appended(r["idx"], bytes(r["leaf_hash"]), True) for r in rows}

    async def entry_by_nonce(self, signer: str, nonce: str) -> StoredEntry | None:
        """The entry ``signer`` made with ``nonce``, if any (a server statement's content address)."""
        index = await self.pool.fetchval(_NONCE_INDEX, signer, nonce)
        return None if index is None else await self.entry_at(index)

    async def nonce_used(self, signer: str, nonce: str) -> bool:
        return await self.any_nonce_used(signer, [nonce])

    async def any_nonce_used(self, signer: str, nonces: Sequence[str]) -> bool:
        """Whether ``signer`` used any of ``nonces``."""
        used: bool = await self.pool.fetchval(
            "SELECT EXISTS (SELECT 1 FROM entry_nonces WHERE signer = $1 AND nonce = ANY($2::text[]))",
            signer,
            list(nonces),
        )
        return used

    async def entry_by_nonce_and_nonce_used(
        self, signer: str, nonce: str, other_signer: str, other_nonce: str
    ) -> tuple[StoredEntry | None, bool]:
        """:meth:`entry_by_nonce` of (``signer``, ``nonce``) and :meth:`nonce_used` of (``other_signer``,
        ``other_nonce``) in one round trip, and one more when the entry is there (a report's two
        questions before grading: services/intake.py)."""
        probe = (signer, nonce, other_signer, other_nonce)
        index, used = (await self.nonce_probes([probe]))[probe]
        return (None if index is None else await self.entry_at(index)), used

    async def nonce_probes(self, probes: Sequence[NonceProbe]) -> dict[NonceProbe, tuple[int | None, bool]]:
        """For each probe, :meth:`entry_by_nonce`'s index (None: no such entry) and :meth:`nonce_used`'s
        answer, all in one round trip (the reports being checked at once: services/intake.py)."""
        if not probes:
            return {}
        rows = await self.pool.fetch(_NONCE_PROBES, *(list(column) for column in zip(*probes, strict=True)))
        return {probes[r["pos"] - 1]: (r["idx"], bool(r["used"])) for r in rows}

    async def entry_at(self, index: int) -> StoredEntry | None:
        """The entry at ``index``, which a side table names: written with it, so there unless an operator
        archived its partition (docs/operations.md, "Old partitions"), as the join used to find."""
        r = await self.pool.fetchrow("SELECT leaf, leaf_hash FROM entries WHERE idx = $1", index)
        return None if r is None else StoredEntry(index, bytes(r["leaf"]), bytes(r["leaf_hash"]))

    async def heads_of_kind(self, kind: str, before: int, start: int = 0) -> list[EntryHead]:
        """The heads of the entries of ``kind`` with ``start <= index < before``, in log order."""
        rows = await self.pool.fetch(
            "SELECT idx, subject, statement_hash FROM entries WHERE kind = $1 AND idx >= $3 AND idx < $2 "
            "ORDER BY idx",
            kind,
            before,
            start,
        )
        return [EntryHead(r["idx"], r["subject"], bytes(r["statement_hash"])) for r in rows]

    async def latest_heads_of_kind(self, kind: str, before: int) -> list[EntryHead]:
        """Each subject's newest entry of ``kind`` below index ``before`` (one row per subject, by subject)."""
        rows = await self.pool.fetch(
            "SELECT DISTINCT ON (subject) idx, subject, statement_hash FROM entries "
            "WHERE kind = $1 AND idx < $2 ORDER BY subject, idx DESC",
            kind,
            before,
        )
        return [EntryHead(r["idx"], r["subject"], bytes(r["statement_hash"])) for r in rows]

    async def leaves_of_kind(self, kind: str, before: int, start: int = 0) -> list[tuple[int, bytes]]:
        """Entries of ``kind`` with ``start <= index < before``, in log order."""
        rows = await self.pool.fetch(
            "SELECT idx, leaf FROM entries WHERE kind = $1 AND idx >= $3 AND idx < $2 ORDER BY idx",
            kind,
            before,
            start,
        )
        return [(r["idx"], bytes(r["leaf"])) for r in rows]

    async def append(self, entries: Sequence[CheckedEntry], follow: Follow | None = None) -> list[Appended]:
        """Append ``entries`` atomically: all are written or none; duplicates get their first index."""
        [result] = await self.append_groups([(entries, follow)])
        if isinstance(result, Exception):
            raise result
        return result

    async def append_groups(
        self, groups: Sequence[tuple[Sequence[CheckedEntry], Follow | None]]
    ) -> list[list[Appended] | Exception]:
        """Append each group atomically, one after another, in one transaction (one commit to wait for).

        With several groups each runs under its own savepoint: a group that fails (a replayed nonce, say)
        is rolled back alone and its exception is returned in its place. The result is what appending
        the groups one by one would give.
        """
        try:
            return await self._append_groups_once(groups)
        except WrittenMeanwhile:  # the aborted transaction is gone; under the lock again, it says why
            return await self._append_groups_once(groups)

    async def _append_groups_once(
        self, groups: Sequence[tuple[Sequence[CheckedEntry], Follow | None]]
    ) -> list[list[Appended] | Exception]:
        if (written := await self._append_new(groups)) is not None:
            return written
        if (written := await self._append_new_followed(groups)) is not None:
            return written
        results: list[list[Appended] | Exception] = []
        room = self.partitions.room()
        async with self.pool.acquire() as conn, conn.transaction():
            start: int = await conn.fetchval("SELECT next_index FROM log_sequence FOR UPDATE")
            next_index = start
            if len(groups) > 1:
                # The common case, appends that queued up and all succeed: written under one savepoint.
                # If anything fails (one group's replayed nonce, say), the savepoint undoes it and the
                # groups are appended one by one below, each failing or not on its own.
                try:
                    async with conn.transaction():
                        done, next_index = await self._append_all(conn, room, groups, start)
                except Exception:
                    next_index = start
                else:
                    results.extend(done)
                    groups = []
            for entries, follow in groups:
                if len(groups) == 1:
                    out, next_index = await self._append_followed(conn, room, entries, follow, next_index)
                else:
                    try:
                        async with conn.transaction():  # a savepoint
                            out, next_index = await self._append_followed(
                                conn, room, entries, follow, next_index
                            )
                    except WrittenMeanwhile:
                        raise  # the whole append starts again (append_groups)
                    except Exception as exc:
                        results.append(exc)
                        continue
                results.append(out)
            if next_index != start:
                await conn.execute("UPDATE log_sequence SET next_index = $1", next_index)
        self._next_hint = next_index
        room.committed()
        if next_index != start:
            await self.partitions.ahead(self.pool, next_index - 1)
        return results

    async def _append_new(
        self, groups: Sequence[tuple[Sequence[CheckedEntry], Follow | None]]
    ) -> list[list[Appended] | Exception] | None:
        """The common append in one statement in a transaction of its own (migration 0022): entries
        none of which is in the log, without follow entries, into partitions known to exist. None,
        having written nothing, when that does not hold; the general path then appends them and says
        why where it must."""
        if any(follow is not None for _, follow in groups):
            return None
        entries = [e for group, _ in groups for e in group]
        n = len(entries)
        covered = self.partitions.covered  # 0 until this process has made or seen its partitions
        if not n or n > _ONE_STATEMENT_ROWS or covered == 0:
            return None
        if not _distinct(entries):
            return None
        start = await self._one_call(APPEND_NEW, [], entries, covered, len(groups))
        if start is None:
            return None
        results: list[list[Appended] | Exception] = []
        at = start
        for group, _ in groups:
            results.append([Appended(at + k, e.leaf_hash, False) for k, e in enumerate(group)])
            at += len(group)
        self._next_hint = at
        await self.partitions.ahead(self.pool, at - 1)
        return results

    async def _append_new_followed(
        self, groups: Sequence[tuple[Sequence[CheckedEntry], Follow | None]]
    ) -> list[list[Appended] | Exception] | None:
        """Groups with follow entries (reports and their graded evidence) as :meth:`_append_new` writes
        groups without: one call, in a transaction of its own, when every entry is new. The follow
        entries name their group's indexes, so they are made for the indexes the groups would get from
        the next index this store expects (``_next_hint``), and the call (migration 0026) writes only if
        that is the log's next index under the lock. None, having written nothing, whenever that does
        not hold; the general path then appends them (calling ``follow`` again, with its own results: a
        follow has no effects of its own) and says why where it must.

        Where other processes append too, the hint is often stale, and a miss costs a call and a follow
        for nothing: after each miss in a row the next 1, 3, 7, ... 63 such groups go the general way
        without trying (bench/README.md, "Report ingest, session 24")."""
        if all(follow is None for _, follow in groups) or any(not group for group, _ in groups):
            return None
        covered = self.partitions.covered  # 0 until this process has made or seen its partitions
        expected = self._next_hint
        if covered == 0 or expected is None:  # the general path learns the next index
            return None
        if self._skip:
            self._skip -= 1
            return None
        planned = _planned(groups, expected)
        if planned is None:
            return None
        entries, results = planned
        n = len(entries)
        if n > _ONE_STATEMENT_ROWS or expected + n > covered or not _distinct(entries):
            return None
        start = await self._one_call(APPEND_NEW_AT, [expected], entries, covered, len(groups))
        if start is None:
            return None
        if start < 0:  # another writer moved the log on: nothing was written
            self._next_hint = -1 - start
            self._misses = min(self._misses + 1, 6)
            self._skip = (1 << self._misses) - 1
            return None
        self._misses = 0
        self._next_hint = start + n
        await self.partitions.ahead(self.pool, start + n - 1)
        return results

    async def _one_call(
        self, query: str, first: list[object], entries: list[CheckedEntry], covered: int, groups: int
    ) -> int | None:
        """``query`` (APPEND_NEW or APPEND_NEW_AT) with ``first`` and the arguments of ``entries``: its
        answer, or None where the general path must append ``groups`` groups and say why.

        An error the server reports undid the whole call. A unique violation (a statement or nonce
        logged while the call waited for the lock; a writer that skipped the lock) goes the general way,
        which says which; so does a timeout when several requests' groups are queued here, so that it
        fails only the group that waits. Anything else is raised as the general path would. (Were the
        connection to end after the commit but before the answer, the general path would find every
        statement logged and answer with their indexes, as for a client's retry.)"""
        try:
            arguments = append_new_arguments(entries, covered)
        except InvalidInput:
            return None
        try:
            async with self.pool.acquire() as conn:
                answer: int | None = await conn.fetchval(query, *first, *arguments)
        except asyncpg.UniqueViolationError:
            return None
        except asyncpg.QueryCanceledError:
            if groups == 1:
                raise
            return None
        return answer

    @classmethod
    async def _append_all(
        cls,
        conn: asyncpg.pool.PoolConnectionProxy,
        room: Room,
        groups: Sequence[tuple[Sequence[CheckedEntry], Follow | None]],
        next_index: int,
    ) -> tuple[list[list[Appended]], int]:
        """Append every group, raising if any fails: without follow entries, all with one set of
        statements (as one batch); with some, one group after another (as under their own savepoints)."""
        if any(follow is not None for _, follow in groups):
            done = []
            for entries, follow in groups:
                out, next_index = await cls._append_followed(conn, room, entries, follow, next_index)
                done.append(out)
            return done, next_index
        out, next_index = await cls._append_group(
            conn, room, [e for entries, _ in groups for e in entries], next_index
        )
        at, done = 0, []
        for entries, _ in groups:
            done.append(out[at : at + len(entries)])
            at += len(entries)
        return done, next_index

    @classmethod
    async def _append_followed(
        cls,
        conn: asyncpg.pool.PoolConnectionProxy,
        room: Room,
        entries: Sequence[CheckedEntry],
        follow: Follow | None,
        next_index: int,
        *,
        together: bool = True,
    ) -> tuple[list[Appended], int]:
        """Append ``entries``, then what ``follow`` makes of their results, in the same transaction.

        Both are written together when neither meets anything in the log or each other (the common
        case: a report and its graded evidence); otherwise (or ``together=False``) one after the other,
        as if never tried together.
        """
        if follow is not None and together:
            written = await cls._append_together(conn, room, entries, follow, next_index)
            if written is not None:
                return written
        out, next_index = await cls._append_group(conn, room, entries, next_index)
        if follow is not None:
            more, next_index = await cls._append_group(conn, room, follow(out), next_index)
            out = out + more
        return out, next_index

    @classmethod
    async def _append_together(
        cls,
        conn: asyncpg.pool.PoolConnectionProxy,
        room: Room,
        entries: Sequence[CheckedEntry],
        follow: Follow,
        next_index: int,
    ) -> tuple[list[Appended], int] | None:
        """Append ``entries`` and what ``follow`` makes of their results in one write, planned as if
        nothing were in the log; None, having written nothing, when that plan does not hold.

        Whenever this writes, the results are those of :meth:`_append_followed` with ``together=False``:
        each part is planned as that one plans it when no statement and no nonce is in the log, and a
        statement or a nonce met twice (in the log, or in both parts) makes the write fail. ``follow`` may then be
        called again, with the true results, so it must not have effects of its own.
        """
        try:
            out, new, _ = cls._plan(entries, {}, next_index)
            if not new:
                return None
            more, new_more, _ = cls._plan(follow(out), {}, next_index + len(new))
        except Exception:  # a nonce twice in the batch, or follow refusing: let the one-by-one path say
            return None
        try:
            await cls._copy_entries(conn, room, new + new_more)
        except asyncpg.UniqueViolationError as exc:
            if exc.constraint_name not in (_STATEMENT_CONSTRAINT, _NONCE_CONSTRAINT):
                raise
            return None
        await cls._register_keys(conn, new)
        await cls._register_keys(conn, new_more)
        return out + more, next_index + len(new) + len(new_more)

    @staticmethod
    def _plan(
        entries: Sequence[CheckedEntry], existing: dict[bytes, tuple[int, bytes]], next_index: int
    ) -> tuple[list[Appended], list[tuple[int, CheckedEntry]], dict[tuple[str, str], int]]:
        """Indexes for ``entries`` given the statements already in the log (``existing``): the results,
        the new rows, and the batch position of each new (signer, nonce)."""
        existing = dict(existing)
        out: list[Appended] = []
        new: list[tuple[int, CheckedEntry]] = []
        nonce_pos: dict[tuple[str, str], int] = {}
        for pos, e in enumerate(entries):
            if e.statement_hash in existing:
                idx, leaf_hash = existing[e.statement_hash]
                out.append(Appended(idx, leaf_hash, True))
                continue
            if (e.signer, e.nonce) in nonce_pos:
                raise NonceReplay(f"entries[{pos}]: nonce {e.nonce!r} of {e.signer} is used twice")
            idx = next_index + len(new)
            nonce_pos[(e.signer, e.nonce)] = pos
            existing[e.statement_hash] = (idx, e.leaf_hash)
            new.append((idx, e))
            out.append(Appended(idx, e.leaf_hash, False))
        return out, new, nonce_pos

    @staticmethod
    async def _copy_entries(
        conn: asyncpg.pool.PoolConnectionProxy, room: Room, new: list[tuple[int, CheckedEntry]]
    ) -> None:
        """Write ``new`` and their statements and nonces: a unique violation of the side tables says a
        statement or a nonce is in the log already."""
        await room.before_write(conn, new[-1][0])
        if len(new) <= _ONE_STATEMENT_ROWS and await _insert_unless_known(conn, new):
            return
        async with conn.transaction():  # a savepoint: a unique violation undoes only this
            await conn.execute(
                "WITH s AS (INSERT INTO entry_statements (statement_hash, idx) "
                "SELECT * FROM unnest($1::bytea[], $2::bigint[])) "
                "INSERT INTO entry_nonces (signer, nonce, idx) "
                "SELECT * FROM unnest($3::text[], $4::text[], $2::bigint[])",
                [e.statement_hash for _, e in new],
                [i for i, _ in new],
                [e.signer for _, e in new],
                [e.nonce for _, e in new],
            )
            await conn.copy_records_to_table("entries", columns=ENTRY_COLUMNS, records=entry_records(new))

    @classmethod
    async def _append_group(
        cls,
        conn: asyncpg.pool.PoolConnectionProxy,
        room: Room,
        entries: Sequence[CheckedEntry],
        next_index: int,
    ) -> tuple[list[Appended], int]:
        """Write ``entries`` from ``next_index`` on (the sequence row is locked); return the next index.

        Statements are written as if none were in the log yet; the primary keys of the side tables of
        statement hashes and (signer, nonce) say otherwise, rarely, and only then are the statements and nonces looked up (a
        resubmission gets its first index back; a reused nonce is a replay).
        """
        try:
            out, new, _ = cls._plan(entries, {}, next_index)
            if not new:
                return out, next_index
            await cls._copy_entries(conn, room, new)
        except NonceReplay:
            pass  # a nonce twice in the batch, unless one of the two is a resubmission: look up below
        except asyncpg.UniqueViolationError as exc:
            if exc.constraint_name not in (_STATEMENT_CONSTRAINT, _NONCE_CONSTRAINT):
                raise
        else:
            await cls._register_keys(conn, new)
            return out, next_index + len(new)
        # Some statement may be in the log already: look them up, then write the rest.
        existing = {
            bytes(r["statement_hash"]): (r["idx"], bytes(r["leaf_hash"]))
            for r in await conn.fetch(_EXISTING, [e.statement_hash for e in entries])
        }
        out, new, nonce_pos = cls._plan(entries, existing, next_index)
        if not new:
            return out, next_index
        try:
            await cls._copy_entries(conn, room, new)
        except asyncpg.UniqueViolationError as again:
            if again.constraint_name != _NONCE_CONSTRAINT:
                raise
            raise await cls._replay(conn, new, nonce_pos) from again
        await cls._register_keys(conn, new)
        return out, next_index + len(new)

    @staticmethod
    async def _replay(
        conn: asyncpg.pool.PoolConnectionProxy,
        new: list[tuple[int, CheckedEntry]],
        nonce_pos: dict[tuple[str, str], int],
    ) -> NonceReplay:
        """The replay to report: the first position whose (signer, nonce) the log already holds."""
        used = await conn.fetch(
            "SELECT signer, nonce FROM entry_nonces WHERE (signer, nonce) IN "
            "(SELECT * FROM unnest($1::text[], $2::text[]))",
            [e.signer for _, e in new],
            [e.nonce for _, e in new],
        )
        if not used:
            return NonceReplay("a nonce in this batch was already used")
        pos, signer, nonce = min(
            (nonce_pos[(r["signer"], r["nonce"])], r["signer"], r["nonce"]) for r in used
        )
        return NonceReplay(f"entries[{pos}]: nonce {nonce!r} of {signer} was already used")

    @staticmethod
    async def _register_keys(
        conn: asyncpg.pool.PoolConnectionProxy, new: list[tuple[int, CheckedEntry]]
    ) -> None:
        """Record the keys the new cards introduce (the first card of a key gives its index).

        Admission read the registrations before this transaction held the sequence lock; a card committed
        since then must not be contradicted (a key's type, controller and roles are fixed). Keys are only
        ever written here, under that lock: up to 256 are written by one statement that leaves out those
        already registered (one round trip while the lock is held, where a savepoint and a COPY took
        four), more by a COPY that fails whole if any is; only keys registered already, rare, are read
        and compared with what is registered.
        """
        introduced = _introduced(new)
        if not introduced:
            return
        rows = [
            (reg.id, reg.public_key, i, reg.kind, reg.controller, list(reg.roles))
            for reg, i in introduced.values()
        ]
        if len(rows) <= _ONE_STATEMENT_ROWS:
            columns = [list(c) for c in zip(*rows, strict=True)]
            columns[5] = [json.dumps(roles) for roles in columns[5]]
            written = {r["id"] for r in await conn.fetch(_INSERT_NEW_KEYS, *columns)}
        else:  # many (a batch of cards): a COPY costs less per row; a key already there fails it whole
            written = set()
            try:
                async with conn.transaction(), checked_inserts(conn):
                    await conn.copy_records_to_table("keys", columns=_KEY_COLUMNS, records=rows)
                return
            except asyncpg.UniqueViolationError as exc:
                if exc.constraint_name != _KEYS_CONSTRAINT:
                    raise
        rest = [key for key in introduced if key not in written]
        if not rest:
            return
        for r in await conn.fetch(
            "SELECT k.id, k.kind, k.controller, k.roles FROM unnest($1::text[]) AS t(id) JOIN keys k ON k.id = t.id",
            rest,
        ):
            reg = introduced.pop(r["id"])[0]
            if (r["kind"], r["controller"], tuple(r["roles"])) != (reg.kind, reg.controller, reg.roles):
                raise InvalidInput(
                    f"{reg.id} is registered as {r['kind']}; a key's card type, controller and roles never change"
                )
        if missing := [row for row in rows if row[0] in introduced and row[0] not in written]:
            async with checked_inserts(conn):
                await conn.copy_records_to_table("keys", columns=_KEY_COLUMNS, records=missing)

    async def key_entry(self, key_id: str) -> tuple[bytes, int] | None:
        """The public key registered for ``key_id`` and the index of the entry that registered it."""
        r = await self.pool.fetchrow("SELECT public_key, first_idx FROM keys WHERE id = $1", key_id)
        return None if r is None else (bytes(r["public_key"]), r["first_idx"])

    async def sequenced_size(self) -> int:
        return await sequenced_size(self.pool)

    async def latest_checkpoint(self) -> StoredCheckpoint | None:
        r = await self.pool.fetchrow(
            "SELECT size, root, signed_note FROM checkpoints ORDER BY size DESC LIMIT 1"
        )
        return None if r is None else StoredCheckpoint(r["size"], bytes(r["root"]), r["signed_note"])

    async def checkpoint_at(self, size: int) -> StoredCheckpoint | None:
        r = await self.pool.fetchrow("SELECT size, root, signed_note FROM checkpoints WHERE size = $1", size)
        return None if r is None else StoredCheckpoint(r["size"], bytes(r["root"]), r["signed_note"])

    async def listed(self, start: int, end: int) -> list[ListedEntry]:
        """Entries ``[start, end)`` by kind, signer and subject, in log order (their leaves not read)."""
        rows = await self.pool.fetch(
            "SELECT idx, kind, signer, subject FROM entries WHERE idx >= $1 AND idx < $2 ORDER BY idx",
            start,
            end,
        )
        return [ListedEntry(r["idx"], r["kind"], r["signer"], r["subject"]) for r in rows]

    async def entries(self, start: int, end: int, max_bytes: int | None = None) -> list[StoredEntry]:
        """Entries ``[start, end)``; with ``max_bytes``, only those whose leaves before them in the range
        hold fewer bytes (at least one entry). The leaves' lengths are read first, without the leaves
        (a leaf stored out of line is not fetched for its length): before 2026-12-07 a page of 1,000 old
        rating snapshots (~190 KB each) read and encoded 192 MiB for one request."""
        if max_bytes is not None:
            lengths = await self.pool.fetch(
                "SELECT idx, octet_length(leaf) AS n FROM entries WHERE idx >= $1 AND idx < $2 ORDER BY idx",
                start,
                end,
            )
            if not lengths:
                return []
            # Only the entries whose lengths were read: one committed between the two queries is read by
            # the next page, never counted out of the budget.
            end = lengths[-1]["idx"] + 1
            held = 0
            for row in lengths:
                if held >= max_bytes:
                    end = row["idx"]
                    break
                held += row["n"]
        rows = await self.pool.fetch(
            "SELECT idx, leaf, leaf_hash FROM entries WHERE idx >= $1 AND idx < $2 ORDER BY idx", start, end
        )
        return [StoredEntry(r["idx"], bytes(r["leaf"]), bytes(r["leaf_hash"])) for r in rows]

    async def nodes(
        self,
        coords: Iterable[tuple[int, int]],
        conn: asyncpg.Connection | asyncpg.pool.PoolConnectionProxy | None = None,
    ) -> dict[tuple[int, int], bytes]:
        want = sorted(set(coords))
        if not want:
            return {}
        rows = await (conn or self.pool).fetch(
            "SELECT level, idx, hash FROM tree_nodes WHERE (level, idx) IN "
            "(SELECT * FROM unnest($1::smallint[], $2::bigint[]))",
            [lv for lv, _ in want],
            [i for _, i in want],
        )
        return {(r["level"], r["idx"]): bytes(r["hash"]) for r in rows}

    async def node_runs(self, runs: Sequence[tuple[int, int, int]]) -> list[bytes]:
        """The hashes of each run ``(level, first, count)`` of stored nodes, concatenated in index order,
        in one query of index range scans (a hash tile is one run); a run not stored whole comes back
        shorter."""
        if not runs:
            return []
        # One primary-key range scan per run (the LIMIT keeps the subquery from being flattened into a
        # join). As a plain join the planner, which cannot see how narrow each range is, scanned all of
        # tree_nodes in parallel at 10^7 entries: 2.9 s per query instead of 2.7 ms (bench/growth.py).
        rows = await self.pool.fetch(
            "SELECT t.i, n.hash FROM unnest($1::smallint[], $2::bigint[], $3::bigint[]) WITH ORDINALITY "
            "AS t(level, lo, hi, i) CROSS JOIN LATERAL (SELECT idx, hash FROM tree_nodes "
            "WHERE level = t.level AND idx >= t.lo AND idx < t.hi ORDER BY idx LIMIT t.hi - t.lo) n "
            "ORDER BY t.i, n.idx",
            [lv for lv, _, _ in runs],
            [first for _, first, _ in runs],
            [first + count for _, first, count in runs],
        )
        out = [bytearray() for _ in runs]
        for i, h in rows:
            out[i - 1] += h
        return [bytes(b) for b in out]

    async def full_tile_subtrees(self, keys: Sequence[tuple[int, int]]) -> dict[tuple[int, int], bytes]:
        """The stored subtrees (:func:`~trustscore.ledger.tiles.encode_subtree`) of the full hash tiles
        ``keys`` ((level, index) pairs) that have one, in one query; none where the table is not there
        (a replica that has not replayed migration 0018 yet)."""
        if not keys:
            return {}
        try:
            if len(keys) == 1:  # most cold proofs: a primary-key lookup costs ~0.1 ms less than the join
                rows = await self.pool.fetch(
                    "SELECT level, idx, subtree FROM hash_tiles WHERE level = $1 AND idx = $2", *keys[0]
                )
            else:
                rows = await self.pool.fetch(
                    "SELECT t.level, t.idx, h.subtree FROM unnest($1::smallint[], $2::bigint[]) "
                    "AS t(level, idx) JOIN hash_tiles h ON h.level = t.level AND h.idx = t.idx",
                    [lv for lv, _ in keys],
                    [i for _, i in keys],
                )
        except asyncpg.UndefinedTableError:
            return {}
        return {(r["level"], r["idx"]): bytes(r["subtree"]) for r in rows}

    @staticmethod
    async def write_full_tiles(
        conn: asyncpg.Connection | asyncpg.pool.PoolConnectionProxy, old_size: int, new_size: int
    ) -> None:
        """Store the subtree of every hash tile the tree's growth from ``old_size`` to ``new_size`` made
        full, from its stored nodes (call after writing the new ones, in their transaction)."""
        done = tiles.full_tiles_between(old_size, new_size)
        if done:
            await conn.execute(_WRITE_TILES, [lv for lv, _ in done], [n for _, n in done])

    async def integrate(
        self, sign: Callable[[int, bytes], str], *, max_batch: int
    ) -> StoredCheckpoint | None:
        """Extend the tree over newly sequenced entries and store a signed checkpoint.

        Returns the new checkpoint, or None when there was nothing to do or another integrator holds the
        lock. Before signing, the new root is proven consistent with the previous checkpoint's, so the
        log key never signs two inconsistent checkpoints.
        """
        async with self.pool.acquire() as conn, conn.transaction():
            if not await conn.fetchval("SELECT pg_try_advisory_xact_lock($1)", _INTEGRATOR_LOCK):
                return None
            prev = await conn.fetchrow("SELECT size, root FROM checkpoints ORDER BY size DESC LIMIT 1")
            size: int = 0 if prev is None else prev["size"]
            sequenced: int = await conn.fetchval("SELECT next_index FROM log_sequence")
            if prev is not None and sequenced == size:
                return None
            target = min(sequenced, size + max_batch)
            leaf_hashes = [
                bytes(r["leaf_hash"])
                for r in await conn.fetch(
                    "SELECT leaf_hash FROM entries WHERE idx >= $1 AND idx < $2 ORDER BY idx", size, target
                )
            ]
            if len(leaf_hashes) != target - size:
                raise RuntimeError(f"entries [{size}, {target}) are not contiguous in the store")
            stored = await self.nodes(merkle.frontier_nodes(size), conn)
            frontier = [stored[c] for c in merkle.frontier_nodes(size)]
            new_nodes, _ = merkle.extend(size, frontier, leaf_hashes)
            known = dict(stored)
            known.update({(lv, i): h for lv, i, h in new_nodes})
            root = merkle.root_from_nodes(target, known)
            if prev is not None and size > 0:
                ranges = merkle.consistency_proof_ranges(size, target)
                need = merkle.required_nodes(ranges) - known.keys()
                known.update(await self.nodes(need, conn))
                proof = merkle.assemble(ranges, known)
                merkle.verify_consistency(size, target, proof, bytes(prev["root"]), root)
            if new_nodes:
                await conn.copy_records_to_table(
                    "tree_nodes", columns=["level", "idx", "hash"], records=new_nodes
                )
                await self.write_full_tiles(conn, size, target)
            note = sign(target, root)
            await conn.execute(
                "INSERT INTO checkpoints (size, root, signed_note) VALUES ($1, $2, $3)", target, root, note
            )
            return StoredCheckpoint(target, root, note)

    async def get_meta(self, key: str) -> str | None:
        """The log's metadata ``key``; None also where the schema is not there (yet: a replica that has
        not replayed the primary's migrations, or a database trustscore never ran on)."""
        try:
            v: str | None = await self.pool.fetchval("SELECT value FROM log_meta WHERE key = $1", key)
        except asyncpg.UndefinedTableError:
            return None
        return v

    async def put_meta_once(self, key: str, value: str) -> str:
        """Store ``value`` under ``key`` unless present; return what is stored."""
        await self.pool.execute(
            "INSERT INTO log_meta (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING", key, value
        )
        stored = await self.get_meta(key)
        assert stored is not None
        return stored


async def sequenced_size(db: asyncpg.Pool | asyncpg.Connection | asyncpg.pool.PoolConnectionProxy) -> int:
    """Entries sequenced so far: every index below it is taken."""
    n: int = await db.fetchval("SELECT next_index FROM log_sequence")
    return n


# The newest $4 entries of the kinds $2 about each of the subjects $1, below index $3 if it is not NULL,
# newest first. One probe of the (subject, kind, idx) index per subject and kind, each read from its newest
# end (migrations/0021_entries_subject_kind.sql): "kind = ANY(...)" on the index's middle column cannot be
# read in idx order, so it read and sorted every entry of those kinds about the subject (an agent with
# 18,000 card versions: 57 ms a lookup, found by review), and without that index it read the kind index
# over every card of the log (a plan of intersected indexes). The bound is a COALESCE, not "$3 IS NULL OR
# idx < $3": under a generic plan (which a cached statement may get after five runs) the OR was a filter,
# and a lookup below an old index read every newer entry of the subject too (found by review). A generic
# plan still reads all the subject's entries below the bound and sorts them (partitions pruned only at
# run time); custom plans read only the newest.
NEWEST_OF_KINDS = (
    "SELECT t.subject, c.idx, c.leaf FROM unnest($1::text[]) AS t(subject) CROSS JOIN LATERAL ("
    "SELECT e.idx, e.leaf FROM unnest($2::text[]) AS k(kind) CROSS JOIN LATERAL ("
    "SELECT idx, leaf FROM entries WHERE subject = t.subject AND kind = k.kind "
    "AND idx < COALESCE($3::bigint, 9223372036854775807) ORDER BY idx DESC LIMIT $4) e "
    "ORDER BY e.idx DESC LIMIT $4) c ORDER BY t.subject, c.idx DESC"
)


async def newest_of_kinds(
    db: asyncpg.Pool | asyncpg.Connection | asyncpg.pool.PoolConnectionProxy,
    subjects: Iterable[str],
    kinds: Iterable[str],
    count: int,
    before: int | None = None,
) -> dict[str, list[tuple[int, bytes]]]:
    """The newest ``count`` entries (index, leaf) of ``kinds`` about each of ``subjects``, newest first,
    only below index ``before`` if given; a subject without any is left out."""
    rows = await db.fetch(NEWEST_OF_KINDS, sorted(set(subjects)), list(kinds), before, count)
    out: dict[str, list[tuple[int, bytes]]] = {}
    for r in rows:
        out.setdefault(r["subject"], []).append((r["idx"], bytes(r["leaf"])))
    return out


# A page of the entries of one kind $1 from index $2 on, in index order, at most $3: one walk of the
# (kind, idx) index from $2. With several kinds in one query ("kind = ANY(...) ORDER BY idx LIMIT"), or
# with the row count estimated low (a table not analysed yet), PostgreSQL fetched every entry of those
# kinds after $2 and sorted them to return the first $3: a catch-up of N cards a page at a time cost
# O(N^2 / page) rows sorted (23 ms a page against 2 ms at 20,000 cards). Run with PAGE_PLAN.
KIND_PAGE = "SELECT idx, subject, kind{} FROM entries WHERE kind = $1 AND idx >= $2 ORDER BY idx LIMIT $3"
PAGE_PLAN = "SET LOCAL enable_bitmapscan = off; SET LOCAL enable_sort = off"


async def kinds_since(
    pool: asyncpg.Pool, kinds: Iterable[str], start: int, limit: int, *, leaf: bool = False
) -> tuple[list[asyncpg.Record], int | None]:
    """The entries (idx, subject, kind, and with ``leaf`` the leaf) of ``kinds`` at index ``start`` or
    later, in index order, at most ``limit`` of each kind (a kind named twice is read once); and None if
    those are all there were, else the index of the last one returned (read on after it: a full page of
    one kind may stop before entries of the others).

    One kind at a time (:data:`KIND_PAGE`), all in one snapshot: appends commit in log order, so it holds
    a prefix of the log. Under READ COMMITTED each query saw its own moment, and an entry of one kind
    committed between them with a later one of another kind behind it was skipped for good."""
    if limit < 1:
        raise ValueError("limit must be at least 1")
    async with pool.acquire() as conn, conn.transaction(isolation="repeatable_read", readonly=True):
        await conn.execute(PAGE_PLAN)
        query = KIND_PAGE.format(", leaf" if leaf else "")
        pages = [await conn.fetch(query, kind, start, limit) for kind in dict.fromkeys(kinds)]  # each once
    full = [page[-1]["idx"] for page in pages if len(page) == limit]
    last = min(full) if full else None
    rows = sorted(
        (r for page in pages for r in page if last is None or r["idx"] <= last), key=lambda r: r["idx"]
    )
    return rows, last


# --- reads for fsck: one repeatable-read snapshot, streamed (services/audit.py) ------------------------


async def index_by_nonce(pool: asyncpg.Pool, signer: str, nonce: str) -> int | None:
    """The log index of the entry ``signer`` made with ``nonce``, if any (a server statement's address)."""
    v: int | None = await pool.fetchval(
        "SELECT idx FROM entry_nonces WHERE signer = $1 AND nonce = $2", signer, nonce
    )
    return v


async def stored_checkpoints(conn: asyncpg.Connection) -> list[StoredCheckpoint]:
    rows = await conn.fetch("SELECT size, root, signed_note FROM checkpoints ORDER BY size")
    return [StoredCheckpoint(r["size"], bytes(r["root"]), r["signed_note"]) for r in rows]


async def stored_verifier_key(conn: asyncpg.Connection) -> str | None:
    value: str | None = await conn.fetchval("SELECT value FROM log_meta WHERE key = 'log_verifier_key'")
    return value


async def entry_batches(
    conn: asyncpg.Connection, batch: int
) -> AsyncIterator[list[tuple[StoredEntry, Columns]]]:
    """Every entry in index order with the columns kept beside it, ``batch`` at a time, through a cursor
    (call inside a transaction)."""
    cursor = await conn.cursor(
        "SELECT idx, leaf, leaf_hash, statement_hash, signer, nonce, kind, subject FROM entries ORDER BY idx"
    )
    while rows := await cursor.fetch(batch):
        yield [
            (
                StoredEntry(r["idx"], bytes(r["leaf"]), bytes(r["leaf_hash"])),
                Columns(bytes(r["statement_hash"]), r["signer"], r["nonce"], r["kind"], r["subject"]),
            )
            for r in rows
        ]


async def side_table_problems(conn: asyncpg.Connection, limit: int = 20) -> list[str]:
    """Disagreements between the entries and the side tables that keep statements and nonces unique
    (migration 0017): an entry whose statement or (signer, nonce) row is missing or names another index,
    or side rows that no entry has. Empty where the side tables do not exist (an older schema)."""
    if await conn.fetchval("SELECT to_regclass('entry_statements') IS NULL"):
        return []
    rows = await conn.fetch(
        "(SELECT 'statement' AS side, e.idx, s.idx AS named FROM entries e "
        " LEFT JOIN entry_statements s ON s.statement_hash = e.statement_hash WHERE s.idx IS DISTINCT FROM e.idx"
        " UNION ALL "
        " SELECT 'nonce', e.idx, n.idx FROM entries e "
        " LEFT JOIN entry_nonces n ON n.signer = e.signer AND n.nonce = e.nonce WHERE n.idx IS DISTINCT FROM e.idx)"
        " ORDER BY 2, 1 LIMIT $1",
        limit,
    )
    out = [
        f"entry {r['idx']}: its {r['side']} row "
        + ("is missing" if r["named"] is None else f"names entry {r['named']}")
        for r in rows
    ]
    counts = await conn.fetchrow(
        "SELECT (SELECT count(*) FROM entries) AS entries, (SELECT count(*) FROM entry_statements) AS statements,"
        " (SELECT count(*) FROM entry_nonces) AS nonces"
    )
    assert counts is not None
    for side in ("statements", "nonces"):
        if counts[side] != counts["entries"]:
            out.append(f"entry_{side} has {counts[side]} rows for {counts['entries']} entries")
    return out


async def hash_tile_problems(
    conn: asyncpg.Connection | asyncpg.pool.PoolConnectionProxy, limit: int = 20
) -> list[str]:
    """Disagreements between the stored full hash tiles (migration 0018) and the tree nodes they repeat:
    a row that differs from the concatenation of its tile's stored nodes, a full tile without a row, or a
    row of a tile that is not full. One aggregation over tree_nodes (which fsck checks against the
    entries), so a row is as good as the entries. Empty where the table does not exist (older schema)."""
    if await conn.fetchval("SELECT to_regclass('hash_tiles') IS NULL"):
        # An older schema has no rows to check; a database that applied migration 0018 must have them.
        migrated = await conn.fetchval(
            "SELECT to_regclass('schema_migrations') IS NOT NULL "
            "AND EXISTS (SELECT 1 FROM schema_migrations WHERE version = 18)"
        )
        return (
            ["migration 0018 is recorded as applied, but the table hash_tiles is missing"] if migrated else []
        )
    rows = await conn.fetch(
        "WITH want AS (SELECT level / 8 AS band, idx >> (8 - level % 8) AS tile, "
        " string_agg(hash, ''::bytea ORDER BY level, idx) AS subtree FROM tree_nodes "
        " GROUP BY 1, 2 HAVING count(*) = 510) "
        "SELECT coalesce(w.band, h.level) AS band, coalesce(w.tile, h.idx) AS tile, "
        " w.subtree IS NULL AS extra, h.subtree IS NULL AS missing "
        "FROM want w FULL JOIN hash_tiles h ON h.level = w.band AND h.idx = w.tile "
        "WHERE w.subtree IS DISTINCT FROM h.subtree ORDER BY 1, 2 LIMIT $1",
        limit,
    )
    return [
        f"hash tile {r['band']}/{r['tile']}: "
        + (
            "the full tile has no stored row"
            if r["missing"]
            else "a stored row, but the tile is not full in the stored tree"
            if r["extra"]
            else "its stored row differs from its stored tree nodes"
        )
        for r in rows
    ]


async def stored_nodes(
    conn: asyncpg.Connection, ids: Sequence[tuple[int, int]]
) -> dict[tuple[int, int], bytes]:
    """The stored hashes of tree nodes ``ids`` ((level, index) pairs); absent ones are left out."""
    rows = await conn.fetch(
        "SELECT n.level, n.idx, n.hash FROM unnest($1::smallint[], $2::bigint[]) AS q(level, idx) "
        "JOIN tree_nodes n ON n.level = q.level AND n.idx = q.idx",
        [level for level, _ in ids],
        [index for _, index in ids],
    )
    return {(r["level"], r["idx"]): bytes(r["hash"]) for r in rows}
