"""SQL of the log's projections: cards, evidence and snapshots, advanced under one advisory lock."""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Final

import asyncpg
import msgspec

from trustscore.errors import StorageError
from trustscore.evidence.project_log import RECORDED, Projected
from trustscore.kinds.admission import registration_of
from trustscore.kinds.cards import AGENT_CARD, AGENT_CARD_V2, CARD_PREDICATE_TYPES, AgentCard
from trustscore.kinds.parties import PARTY_CARD, PartyCard
from trustscore.kinds.service_card import SERVICE_CARD, ServiceCard
from trustscore.ledger import audit
from trustscore.scoring.inputs import EvidenceItem, Snapshot
from trustscore.store import ladder
from trustscore.store.db import checked_inserts
from trustscore.store.log import kinds_since, newest_of_kinds

_PROJECTOR_LOCK = 0x70726F6A  # advisory lock key held while projecting
CARD_KINDS = (
    AGENT_CARD.predicate_type,
    AGENT_CARD_V2.predicate_type,
    PARTY_CARD.predicate_type,
    SERVICE_CARD.predicate_type,
)


Conn = asyncpg.Connection | asyncpg.pool.PoolConnectionProxy
#: Work done in a projection step's transaction over the entries [start, end) it projects.
AfterStep = Callable[[Conn, int, int], Awaitable[object]]


#: Evidence rows converted in a worker thread from this many on (~4.5 µs each on the event loop).
ROWS_OFF_LOOP = 20_000


@dataclass(frozen=True)
class Card:
    index: int
    id: str
    kind: str
    name: str
    endpoint: str | None
    controller: str | None
    card: dict[str, Any]


@dataclass(frozen=True)
class EvidenceRow:
    index: int
    seq: int
    item: EvidenceItem


#: The evidence table's columns, in the order the projector writes them.
EVIDENCE_COLUMNS = [
    "idx",
    "seq",
    "agent",
    "dimension",
    "source",
    "value",
    "result",
    "key",
    "at",
    "issuer",
    "extra_weight",
]


async def _write_projected(conn: asyncpg.pool.PoolConnectionProxy, out: Projected) -> None:
    """The evidence, ladder rows and snapshots of one projector step (each row's foreign key into
    ``entries`` is checked: :func:`~trustscore.store.db.checked_inserts`)."""
    await _write_evidence(conn, out)
    if out.ladder:
        await ladder.insert(conn, out.ladder)
    if out.snapshots:
        await conn.copy_records_to_table(
            "snapshots",
            columns=["idx", "agent", "at", "total", "adjusted", "model_version"],
            records=[
                (
                    s.index,
                    s.snapshot.agent,
                    s.snapshot.at,
                    s.snapshot.total,
                    s.adjusted,
                    s.snapshot.model_version,
                )
                for s in out.snapshots
            ],
        )


async def _write_evidence(
    conn: asyncpg.Connection | asyncpg.pool.PoolConnectionProxy, out: Projected
) -> None:
    if not out.evidence:
        return
    seq: dict[int, int] = {}
    records = []
    for e in out.evidence:
        n = seq[e.index] = seq.get(e.index, -1) + 1
        records.append(
            (
                e.index,
                n,
                e.agent,
                e.dimension,
                e.source,
                e.value,
                e.result,
                e.key,
                e.at,
                e.issuer,
                e.extra_weight,
            )
        )
    await conn.copy_records_to_table("evidence", columns=EVIDENCE_COLUMNS, records=records)


#: This release's derivation versions as migration 0029's trigger compares them ("part version, ...").
DERIVED_UNDER: Final = ", ".join(f"{part} {version}" for part, version in sorted(RECORDED.items()))


async def name_derivation(conn: asyncpg.Connection | asyncpg.pool.PoolConnectionProxy) -> None:
    """Name this release's derivation versions for the rest of ``conn``'s transaction, as a projector step
    does before it moves the projection (migration 0029): for a bench fill that moves it too."""
    await conn.execute("SELECT set_config('trustscore.derivation', $1, true)", DERIVED_UNDER)


async def rederive(
    dsn: str,
    project: Callable[[list[tuple[int, bytes | None]], dict[int, str]], Projected],
    batch: int = 5000,
) -> int | None:
    """Derive the evidence and ladder rows of every projected entry again when the evidence was derived
    under other versions than this release's (:data:`~trustscore.evidence.project_log.RECORDED`; none
    recorded counts as other), in one transaction under the projector's lock, and record this release's;
    return how many entries were derived again (None if the versions were current).

    ``project(entries, rules)`` is called on consecutive runs of entries from index 0, as a projector step
    calls it, on a projection state of its own; ``rules`` names the rung rule each entry's ladder rows were
    written under (a row keeps its rule; an entry without rows gets the current one, those the ladder's
    backfill had not reached too: the backfill is then done). Snapshots depend on no derivation version
    and are not touched.

    It runs on a connection of its own as the database owner, not the app role (which may not delete
    evidence), before any process of this release projects: at start-up, after the migrations
    (docs/operations.md, "Upgrading to migration 0029"). The append-only triggers of evidence and ladder
    are disabled inside the transaction only (their lock blocks writers to those tables, and appends that
    make a partition, until it commits; readers see the old rows meanwhile)."""
    try:
        conn = await asyncpg.connect(dsn)
    except (OSError, asyncpg.PostgresError) as exc:
        raise StorageError(f"cannot connect to PostgreSQL: {exc}") from exc
    try:
        if await _current(conn):  # (without the lock: a start never waits for a projector's step)
            return None
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _PROJECTOR_LOCK)
            if await _current(conn):  # another process derived it meanwhile
                return None
            size: int = await conn.fetchval(
                "SELECT next_index FROM projection_state WHERE name = 'log' FOR UPDATE"
            )
            await conn.execute("DELETE FROM projection_versions")
            await conn.executemany(
                "INSERT INTO projection_versions (part, version) VALUES ($1, $2)", sorted(RECORDED.items())
            )
            if size:
                await _rederive(conn, size, project, batch)
            return size
    finally:
        await conn.close()


async def project_leaves(conn: Conn, start: int, limit: int) -> list[tuple[int, bytes | None]]:
    """(index, leaf) of at most ``limit`` entries from ``start`` in log order, what a projection reads;
    cards yield no evidence, so their leaves are not even read (None)."""
    rows = await conn.fetch(
        "SELECT idx, CASE WHEN kind = ANY($3::text[]) THEN NULL ELSE leaf END AS leaf "
        "FROM entries WHERE idx >= $1 ORDER BY idx LIMIT $2",
        start,
        limit,
        list(CARD_KINDS),
    )
    return [(r["idx"], None if r["leaf"] is None else bytes(r["leaf"])) for r in rows]


async def _current(conn: asyncpg.Connection) -> bool:
    recorded = await conn.fetch("SELECT part, version FROM projection_versions")
    return {r["part"]: r["version"] for r in recorded} == RECORDED


async def _rederive(
    conn: asyncpg.Connection,
    size: int,
    project: Callable[[list[tuple[int, bytes | None]], dict[int, str]], Projected],
    batch: int,
) -> None:
    # derived rows are append-only even for the owner, but for this transaction
    await conn.execute("ALTER TABLE evidence DISABLE TRIGGER evidence_append_only")
    await conn.execute("ALTER TABLE ladder DISABLE TRIGGER ladder_append_only")
    await conn.execute("DELETE FROM evidence")
    for start in range(0, size, batch):
        end = min(size, start + batch)
        rules = await conn.fetch(  # the rows' rules, read before the rows are deleted
            "DELETE FROM ladder WHERE idx >= $1 AND idx < $2 RETURNING idx, rule", start, end
        )
        out = project(await project_leaves(conn, start, end - start), {r["idx"]: r["rule"] for r in rules})
        async with checked_inserts(conn):
            await _write_evidence(conn, out)
            await ladder.insert(conn, out.ladder)
    # every projected entry has its rows now, those the ladder's backfill had not reached too
    await conn.execute("UPDATE projection_state SET next_index = 0 WHERE name = 'ladder_backfill'")
    await conn.execute("ALTER TABLE ladder ENABLE TRIGGER ladder_append_only")
    await conn.execute("ALTER TABLE evidence ENABLE TRIGGER evidence_append_only")


class ProjectionStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def step(
        self,
        project: Callable[[list[tuple[int, bytes | None]]], Projected],
        limit: int,
        after: AfterStep | None = None,
    ) -> Projected | None:
        """Project up to ``limit`` unprojected entries in one transaction; None if none or locked.
        ``after(conn, start, end)`` runs last in the same transaction (webhook events: store/webhooks.py)."""
        async with self.pool.acquire() as conn, conn.transaction():
            if not await conn.fetchval(  # and name the versions it derives under (migration 0029)
                "SELECT pg_try_advisory_xact_lock($1) FROM set_config('trustscore.derivation', $2, true)",
                _PROJECTOR_LOCK,
                DERIVED_UNDER,
            ):
                return None
            start: int = await conn.fetchval(
                "SELECT next_index FROM projection_state WHERE name = 'log' FOR UPDATE"
            )
            rows = await project_leaves(conn, start, limit)
            if not rows:
                return None
            out = project(rows)
            if out.evidence or out.ladder or out.snapshots:
                async with checked_inserts(conn):
                    await _write_projected(conn, out)
            if after is not None:
                await after(conn, start, rows[-1][0] + 1)
            await conn.execute(
                "UPDATE projection_state SET next_index = $1 WHERE name = 'log'", rows[-1][0] + 1
            )
            return out

    async def projected_size(self) -> int:
        n: int = await self.pool.fetchval("SELECT next_index FROM projection_state WHERE name = 'log'")
        return n

    async def evidence_since(self, start: int, end: int) -> list[EvidenceRow]:
        """The evidence of entries ``[start, end)`` in log order. Many rows (a process loading the whole
        log) are converted in a worker thread, so that the event loop keeps serving meanwhile."""
        rows = await self.pool.fetch(
            "SELECT idx, seq, agent, dimension, source, value, result, key, at, issuer, extra_weight "
            "FROM evidence WHERE idx >= $1 AND idx < $2 ORDER BY idx, seq",
            start,
            end,
        )
        if len(rows) < ROWS_OFF_LOOP:
            return [_evidence_row(r) for r in rows]
        return await asyncio.to_thread(lambda: [_evidence_row(r) for r in rows])

    async def evidence_of(self, agent: str, after: tuple[int, int], limit: int) -> list[EvidenceRow]:
        """``agent``'s evidence after the cursor ``(index, seq)`` in log order, at most ``limit`` rows."""
        rows = await self.pool.fetch(
            "SELECT idx, seq, agent, dimension, source, value, result, key, at, issuer, extra_weight "
            "FROM evidence WHERE agent = $1 AND (idx, seq) > ($2, $3) ORDER BY idx, seq LIMIT $4",
            agent,
            after[0],
            after[1],
            limit,
        )
        return [_evidence_row(r) for r in rows]

    async def snapshots_since(self, start: int, end: int) -> list[tuple[int, Snapshot, int | None]]:
        rows = await self.pool.fetch(
            "SELECT idx, agent, at, total, adjusted, model_version FROM snapshots "
            "WHERE idx >= $1 AND idx < $2 ORDER BY idx, agent",
            start,
            end,
        )
        return [
            (
                r["idx"],
                Snapshot(agent=r["agent"], at=r["at"], total=r["total"], model_version=r["model_version"]),
                r["adjusted"],
            )
            for r in rows
        ]

    async def card(self, key_id: str) -> Card | None:
        """The newest card of ``key_id``, with the type and controller its first card fixed."""
        return (await self.cards([key_id])).get(key_id)

    async def cards(self, key_ids: list[str]) -> dict[str, Card]:
        """The newest card of each of ``key_ids`` that has one, in one query (:meth:`card` for many)."""
        found = await newest_of_kinds(self.pool, key_ids, CARD_KINDS, 1)
        return {key_id: _card(*rows[0]) for key_id, rows in found.items()}

    async def agent_names_since(
        self, start: int, limit: int
    ) -> tuple[list[tuple[int, str, str]], int | None]:
        """(index, agent id, display name) of agent cards logged at ``start`` or later, in log order, at most
        ``limit`` of each card kind; and None if those are all there were, else the index of the last one
        returned (read on after it): :func:`~trustscore.store.log.kinds_since`. The name is read alone from
        the stored leaf (checked when it was appended): a third of what parsing the whole card costs."""
        rows, last = await kinds_since(self.pool, CARD_PREDICATE_TYPES, start, limit, leaf=True)
        return [(r["idx"], r["subject"], _card_name(r["idx"], r["leaf"])) for r in rows], last


class _Named(msgspec.Struct):
    name: str


class _NamedStatement(msgspec.Struct):
    predicate: msgspec.Raw  # then decoded: of a key repeated, the last counts (Statement's own rule)


class _Envelope(msgspec.Struct):
    payload: bytes  # base64 in the JSON: msgspec decodes it


_ENVELOPE = msgspec.json.Decoder(_Envelope)
_STATEMENT = msgspec.json.Decoder(_NamedStatement)
_NAMED = msgspec.json.Decoder(_Named)


def _card_name(index: int, leaf: bytes) -> str:
    """The display name of a stored agent card's leaf (the envelope's payload's ``predicate.name``); a
    leaf these structs do not read (none known) is parsed whole, as :meth:`ProjectionStore.card` does."""
    try:
        return _NAMED.decode(_STATEMENT.decode(_ENVELOPE.decode(leaf).payload).predicate).name
    except msgspec.MsgspecError:
        return _card(index, leaf).name


def _card(index: int, leaf: bytes) -> Card:
    stmt = audit.parse_leaf(leaf).statement
    reg = registration_of(stmt)
    p = stmt.predicate
    assert reg is not None
    assert isinstance(p, AgentCard | PartyCard | ServiceCard)
    endpoint = p.endpoint if isinstance(p, AgentCard) else None
    return Card(index, reg.id, reg.kind, p.name, endpoint, reg.controller, msgspec.to_builtins(p))


def _evidence_row(r: asyncpg.Record) -> EvidenceRow:
    at: dt.datetime = r["at"]
    item = EvidenceItem(
        agent=r["agent"],
        dimension=r["dimension"],
        source=r["source"],
        at=at,
        value=r["value"],
        result=r["result"],
        key=r["key"],
        issuer=r["issuer"],
        extra_weight=r["extra_weight"],
    )
    return EvidenceRow(r["idx"], r["seq"], item)
