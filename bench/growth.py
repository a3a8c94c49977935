"""Cost growth: ingest rate and inclusion-proof latency at 10^5, 10^6 and 10^7 log entries, side by side.

One database grows through ``--sizes``. Between sizes the log is filled fast, by COPY of synthetic but
well-formed entries and of every Merkle node they complete (:func:`copy_synthetic`; it and :func:`seal`
are the only writes that know the table layout), then sealed with a checkpoint signed by the log key as the integrator
would (a fresh log first gets 1 % of the first size in real agent cards over HTTP, ``--real-cards``, so
that the planner's statistics know cards). At each size ``trustscore serve`` starts on that database and the bench measures, over real HTTP:
inclusion-proof p50/p90 for random indexes (first pass, then the same proofs warm) next to ``/healthz``,
with a sample of proofs verified against the signed checkpoint (bench/proofs.py's helpers), then ingest
of real signed agent cards in batches of 1000 and singly (bench/ingest.py's helpers). It ends with one
table and each figure's ratio to the first size's. See bench/README.md ("bench/growth.py").

    python bench/growth.py                                   # 10^5, 10^6, 10^7 on embedded PostgreSQL
    python bench/growth.py --sizes 100000,1000000 --data-dir /tmp/growth   # keep the log; reuse it later
    python bench/growth.py --database-url postgresql://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import islice
from pathlib import Path

import asyncpg
import httpx

from _common import LightClient, drop_database, in_data_dir, kept_database, percentile, print_header
from ingest import SERVER_ENV, Phase, bodies_for, cpu_seconds, post_all, presign, run_phases, tree_cpu_seconds
from ingest import _pairs as pairs
from proofs import timed, verify_sample
from trustscore import canonical
from trustscore.devserver import ServeProcess
from trustscore.evidence.project_log import ProjectionState, project
from trustscore.kinds.subscriptions import (
    SUBSCRIPTION_REVOCATION,
    SubscriptionRevocation,
    revocation_subject,
)
from trustscore.ledger import audit, checkpoint, dsse, keys, merkle, note, statements
from trustscore.services import logkey
from trustscore.services.log import LogService
from trustscore.services.webhooks import after_step
from trustscore.settings import Settings
from trustscore.store import db
from trustscore.store.log import LogStore, hash_tile_problems
from trustscore.store.projection_tables import name_derivation

Conn = asyncpg.Connection | asyncpg.pool.PoolConnectionProxy
Node = tuple[int, int, bytes]  # (level, index, hash) of a complete aligned subtree, as in tree_nodes


Entry = tuple[int, bytes, bytes, bytes, str, str, str, str]
"""What appending writes of an entry: (idx, leaf, leaf_hash, statement_hash, signer, nonce, kind, subject)."""


@dataclass
class Rows:
    """Synthetic entries ``[start, end)`` and the tree nodes they complete, as concatenated fixed-size
    byte strings (a worker process makes them: one byte string pickles in a memcpy, 10^5 tuples do not)."""

    start: int
    end: int
    leaves: bytes  # every leaf has the same length (fixed-width nonce, fixed-length key id)
    leaf_hashes: bytes
    statement_hashes: bytes
    levels: list[tuple[int, bytes]]  # per tree level from 0: (first index, hashes) of the inner nodes
    pieces: list[Node] = field(default_factory=list)  # the largest inner nodes, covering the range in order

    def entries(self) -> list[Entry]:
        n = self.end - self.start
        size = len(self.leaves) // n
        out = []
        kid = ""
        for k in range(n):
            i = self.start + k
            if k == 0 or i % PER_SIGNER == 0:
                kid = signer_of(i)
            out.append(
                (
                    i,
                    self.leaves[k * size : (k + 1) * size],
                    self.leaf_hashes[32 * k : 32 * k + 32],
                    self.statement_hashes[32 * k : 32 * k + 32],
                    kid,
                    nonce_of(i),
                    KIND,
                    kid,
                )
            )
        return out

    def nodes(self) -> list[Node]:
        """The complete aligned subtrees inside ``[start, end)``."""
        return [
            (lv, lo + k, hs[32 * k : 32 * k + 32])
            for lv, (lo, hs) in enumerate(self.levels)
            for k in range(len(hs) // 32)
        ]


# --- the writes that know the table layout ---------------------------------------------------------------


async def copy_synthetic(conn: Conn, rows: Rows, more_nodes: list[Node]) -> None:
    """Write ``rows`` and ``more_nodes`` (nodes completed across the start of ``rows``) as appending and
    integrating them would have, inside the caller's transaction: COPY into ``entries`` (and into the
    global-uniqueness side tables ``entry_statements`` and ``entry_nonces`` where the schema has them),
    COPY into ``tree_nodes`` (and the rows of the hash tiles they complete into ``hash_tiles``), and move ``log_sequence`` and the log projection's progress to ``rows.end``.

    The projection moves only because synthetic entries project to nothing (checked on a sample by
    :func:`check_projects_nothing`) and only from ``rows.start``: a projection behind the log is refused.
    """
    moved = await conn.execute(
        "UPDATE log_sequence SET next_index = $2 WHERE next_index = $1", rows.start, rows.end
    )
    if moved != "UPDATE 1":
        raise RuntimeError(f"the log does not end at {rows.start}: was another writer running?")
    entries = rows.entries()
    if await conn.fetchval("SELECT to_regprocedure('trustscore_extend_partitions(bigint)') IS NOT NULL"):
        # Entries partitioned by index (migration 0017): make the partitions these rows need, and the one
        # after, as an append does (under the sequence row, which the UPDATE above holds).
        await conn.execute("SELECT trustscore_extend_partitions($1)", rows.end - 1)
    await conn.copy_records_to_table(
        "entries",
        columns=["idx", "leaf", "leaf_hash", "statement_hash", "signer", "nonce", "kind", "subject"],
        records=entries,
    )
    if await conn.fetchval("SELECT to_regclass('entry_statements') IS NOT NULL"):
        await conn.copy_records_to_table(
            "entry_statements",
            columns=["statement_hash", "idx"],
            records=[(e[3], e[0]) for e in entries],
        )
    if await conn.fetchval("SELECT to_regclass('entry_nonces') IS NOT NULL"):
        await conn.copy_records_to_table(
            "entry_nonces",
            columns=["signer", "nonce", "idx"],
            records=[(e[4], e[5], e[0]) for e in entries],
        )
    await conn.copy_records_to_table(
        "tree_nodes", columns=["level", "idx", "hash"], records=rows.nodes() + more_nodes
    )
    if await conn.fetchval("SELECT to_regclass('hash_tiles') IS NOT NULL"):
        # The full hash tiles these nodes complete, pre-folded from tree_nodes as the integrator does.
        await LogStore.write_full_tiles(conn, rows.start, rows.end)
    if await conn.fetchval("SELECT to_regclass('projection_versions') IS NOT NULL"):
        await name_derivation(conn)  # (migration 0029: the projection moves on under named versions)
    projected = await conn.execute(
        "UPDATE projection_state SET next_index = $2 WHERE name = 'log' AND next_index = $1",
        rows.start,
        rows.end,
    )
    if projected != "UPDATE 1":
        raise RuntimeError(f"the log projection is not at {rows.start}: let the server catch up first")


async def seal(conn: Conn, size: int, root: bytes, signed_note: str) -> None:
    """Store the checkpoint over the filled log, as the integrator does once its consistency proof from
    the previous checkpoint has verified (the caller verifies it first)."""
    await conn.execute(
        "INSERT INTO checkpoints (size, root, signed_note) VALUES ($1, $2, $3)", size, root, signed_note
    )


# -------------------------------------------------------------------------------------------------------

CHUNK = 1 << 16  # entries per worker task and per COPY (chunks after the first are aligned subtrees)
PER_SIGNER = 1000  # synthetic entries per subscriber key: 10^4 keys at 10^7, each clustered in the indexes
SUBSCRIPTION = 0  # what each synthetic revocation revokes: entry 0, itself a revocation, never a subscription
_ISSUED_AT = statements.format_time(datetime(2025, 1, 1, tzinfo=UTC))
_NONCE, _PAYLOAD = "@@nonce@@", "@@payload@@"
KIND = SUBSCRIPTION_REVOCATION.predicate_type


def signer_of(index: int) -> str:
    """The synthetic subscriber key id of entry ``index`` (a made-up key: nothing verifies it)."""
    return keys.key_id(hashlib.sha256(b"growth-signer %d" % (index // PER_SIGNER)).digest())


def templates(kid: str) -> tuple[bytes, bytes]:
    """Payload and leaf bytes of a revocation by ``kid``, each with one placeholder (nonce, payload),
    made by the real statement and envelope encoders so the fast path cannot drift from them."""
    predicate = SubscriptionRevocation(
        nonce=_NONCE, issued_at=_ISSUED_AT, subscriber=kid, subscription=SUBSCRIPTION
    )
    payload = statements.make_statement(
        SUBSCRIPTION_REVOCATION, revocation_subject(kid, SUBSCRIPTION), predicate
    )
    # A well-formed signature that verifies under no key: signing 10^7 statements would take longer
    # than the whole fill, and nothing measured here verifies an old entry's signature.
    sig = dsse.Signature(keyid=kid, sig=canonical.b64encode(bytes(64)))
    leaf = dsse.leaf_bytes(dsse.Envelope(dsse.IN_TOTO_PAYLOAD_TYPE, _PAYLOAD, [sig]))
    return payload.replace(_NONCE.encode(), b"%s"), leaf.replace(_PAYLOAD.encode(), b"%s")


def nonce_of(index: int) -> str:
    return f"growth-{index:012d}"


def synthetic_rows(span: tuple[int, int]) -> Rows:
    """Entries ``[start, end)`` and their inner tree nodes (in a worker process). The first entry is
    parsed back with the log's own parser and must say what its row says."""
    start, end = span
    sha, b64 = hashlib.sha256, canonical.b64encode
    leaves, hashes, statement_hashes = [], [], []
    payload_t = leaf_t = b""
    for i in range(start, end):
        if i == start or i % PER_SIGNER == 0:
            payload_t, leaf_t = templates(signer_of(i))
        payload = payload_t % nonce_of(i).encode()
        leaf = leaf_t % b64(payload).encode()
        leaves.append(leaf)
        hashes.append(sha(b"\x00" + leaf).digest())
        statement_hashes.append(sha(payload).digest())
    if len({len(leaf) for leaf in leaves}) != 1:
        raise RuntimeError("synthetic leaves must all have one length")
    levels, pieces = inner_nodes(start, hashes)
    rows = Rows(start, end, b"".join(leaves), b"".join(hashes), b"".join(statement_hashes), levels, pieces)
    first = rows.entries()[0]
    parsed = audit.parse_leaf(first[1])
    facts = parsed.statement.facts
    if (parsed.statement_hash, facts.signer, parsed.statement.predicate.nonce, parsed.statement.kind.predicate_type, facts.subject) != first[3:]:  # fmt: skip
        raise RuntimeError(f"synthetic entry {start} does not parse back to its row")
    return rows


def inner_nodes(start: int, leaf_hashes: list[bytes]) -> tuple[list[tuple[int, bytes]], list[Node]]:
    """Every complete aligned subtree inside ``[start, start + len(leaf_hashes))``, per level as (first
    index, concatenated hashes), and those of :func:`merkle.range_nodes` (the largest, covering the
    range left to right)."""
    levels: list[tuple[int, list[bytes]]] = []
    lo, row = start, leaf_hashes
    sha = hashlib.sha256
    while row:
        levels.append((lo, row))
        first = lo + (lo & 1)  # the first left child of this level inside the range
        off = first - lo
        row = [sha(b"\x01" + row[k] + row[k + 1]).digest() for k in range(off, len(row) - 1, 2)]
        lo = first >> 1
    pieces = [
        (lv, i, levels[lv][1][i - levels[lv][0]])
        for lv, i in merkle.range_nodes(start, start + len(leaf_hashes))
    ]
    return [(lo, b"".join(hs)) for lo, hs in levels], pieces


def join(frontier: list[Node], pieces: list[Node]) -> list[Node]:
    """Push ``pieces`` (the :func:`inner_nodes` pieces of the range right after the tree whose
    ``frontier`` is given) as :func:`merkle.extend` pushes leaves; ``frontier`` becomes the grown tree's.
    Returns the nodes completed across the range's start."""
    made = []
    for level, index, h in pieces:
        while frontier and frontier[-1][0] == level:  # our left sibling
            h = merkle.node_hash(frontier.pop()[2], h)
            level, index = level + 1, index >> 1
            made.append((level, index, h))
        frontier.append((level, index, h))
    return made


def spans(start: int, end: int) -> Iterator[tuple[int, int]]:
    """``[start, end)`` cut at multiples of :data:`CHUNK`."""
    while start < end:
        stop = min(end, (start // CHUNK + 1) * CHUNK)
        yield start, stop
        start = stop


async def check_projects_nothing(conn: Conn, rows: Rows, sample: int = 1000) -> int:
    """Run the projection (evidence, snapshots, ladder) and the webhook hook it runs in the same
    transaction over the first ``sample`` synthetic entries, and require that they yield nothing, so
    moving the projection's progress past them equals projecting them. Returns the entries checked."""
    some = rows.entries()[:sample]
    state = ProjectionState(b"\x00" * 32, next_index=rows.start)
    out = project([(e[0], e[1]) for e in some], state, verify=False)
    if out.evidence or out.snapshots or out.ladder or out.rejected:
        raise RuntimeError("synthetic entries would yield projection rows: cannot skip projecting them")
    tr = conn.transaction()  # a savepoint, undone below whatever the hook wrote
    await tr.start()
    try:
        events = await after_step({})(conn, rows.start, rows.start + len(some))
    finally:
        await tr.rollback()
    if events:
        raise RuntimeError("synthetic entries would yield webhook events: cannot skip projecting them")
    return len(some)


@dataclass
class Fill:
    start: int
    end: int
    seconds: float
    vacuum_seconds: float
    database_bytes: tuple[int, int]  # before, after
    checked: int  # synthetic entries run through the projection, yielding nothing
    cpu: tuple[float, float, float | None] = (0.0, 0.0, None)  # seconds: this process, workers, backend


async def fill(dsn: str, data_dir: Path, target: int, check_tree_upto: int) -> Fill:
    """Grow the log to ``target`` entries with synthetic entries and sign a checkpoint over it."""
    settings = Settings(data_dir=data_dir)
    await db.migrate(dsn)
    pool = await db.create_pool(dsn, min_size=1, max_size=2)
    try:
        store = LogStore(pool)
        key = logkey.load_or_create(settings.log_key_file)
        await logkey.bind(store, settings.log_origin, key)
        service = LogService(store, key, settings.log_origin, max_batch=settings.max_batch)
        await service.integrate_pending()  # a previous run's last entries, if any
        start = await store.sequenced_size()
        before = await pool.fetchval("SELECT pg_database_size(current_database())")
        if start >= target:
            return Fill(start, start, 0.0, 0.0, (before, before), 0)
        prev = await store.latest_checkpoint()
        print(f"filling {start:,} -> {target:,} entries (COPY, {CHUNK:,} per chunk) ...", flush=True)
        t0 = time.perf_counter()
        checked = 0
        self0, workers0 = _rusage(resource.RUSAGE_SELF), _rusage(resource.RUSAGE_CHILDREN)
        loop = asyncio.get_running_loop()
        async with pool.acquire() as conn, conn.transaction():
            await conn.execute("SET LOCAL synchronous_commit = off")
            backend = _backend_cpu(await conn.fetchval("SELECT pg_backend_pid()"))
            stored = await store.nodes(merkle.frontier_nodes(start), conn)
            frontier = [(lv, i, stored[lv, i]) for lv, i in merkle.frontier_nodes(start)]
            with ProcessPoolExecutor(max_workers=os.cpu_count()) as ex:
                todo = spans(start, target)
                pending = [loop.run_in_executor(ex, synthetic_rows, s) for s in islice(todo, 3)]
                while pending:
                    rows = await pending.pop(0)
                    pending += [loop.run_in_executor(ex, synthetic_rows, s) for s in islice(todo, 1)]
                    await copy_synthetic(conn, rows, join(frontier, rows.pieces))
                    if not checked:
                        checked = await check_projects_nothing(conn, rows)
            root = merkle.root_from_nodes(target, {(lv, i): h for lv, i, h in frontier})
            if prev is not None and prev.size:
                ranges = merkle.consistency_proof_ranges(prev.size, target)
                proof = merkle.assemble(ranges, await store.nodes(merkle.required_nodes(ranges), conn))
                merkle.verify_consistency(prev.size, target, proof, prev.root, root)
            await seal(conn, target, root, service.sign_checkpoint(target, root))
            if backend is not None:
                backend = _backend_cpu(await conn.fetchval("SELECT pg_backend_pid()"), backend)
        seconds = time.perf_counter() - t0
        cpu = (
            _rusage(resource.RUSAGE_SELF) - self0,
            _rusage(resource.RUSAGE_CHILDREN) - workers0,  # the pool's processes, reaped when it closed
            backend,
        )
        if target <= check_tree_upto:  # not timed
            async with pool.acquire() as conn:
                await check_tree(conn, target)
        t0 = time.perf_counter()
        owner = await asyncpg.connect(dsn)  # not the pool's: it acts as the app role, which owns nothing
        try:
            await owner.execute("VACUUM (ANALYZE)")  # what autovacuum would have done to a grown log
        finally:
            await owner.close()
        vacuum = time.perf_counter() - t0
        after = await pool.fetchval("SELECT pg_database_size(current_database())")
        return Fill(start, target, seconds, vacuum, (before, after), checked, cpu)
    finally:
        await pool.close()


def _rusage(who: int) -> float:
    r = resource.getrusage(who)
    return r.ru_utime + r.ru_stime


def _backend_cpu(pid: int, since: float | None = 0.0) -> float | None:
    """CPU seconds of the PostgreSQL backend ``pid`` minus ``since``; None where it is not visible (a
    server on another machine or in a container)."""
    try:
        return cpu_seconds(pid) - (since or 0.0)
    except OSError:
        return None


async def check_tree(conn: Conn, size: int) -> None:
    """Every stored tree node equals a from-scratch rebuild from the stored leaves, and every stored full
    hash tile its nodes (small logs only)."""
    leaves = [
        bytes(r[0]) for r in await conn.fetch("SELECT leaf FROM entries WHERE idx < $1 ORDER BY idx", size)
    ]
    want = merkle.complete_nodes([merkle.leaf_hash(leaf) for leaf in leaves])
    got = {(r[0], r[1]): bytes(r[2]) for r in await conn.fetch("SELECT level, idx, hash FROM tree_nodes")}
    if got != want:
        raise RuntimeError(
            f"stored tree nodes differ from a rebuild: {len(got)} stored, {len(want)} expected"
        )
    if problems := await hash_tile_problems(conn):
        raise RuntimeError(f"stored hash tiles differ from the stored nodes: {problems}")
    print(
        f"  tree checked: all {len(got):,} stored nodes equal a rebuild from the {size:,} leaves, and "
        "every full hash tile's stored row repeats them",
        flush=True,
    )


# --- measuring -------------------------------------------------------------------------------------------


#: CPU seconds so far of the server process and of PostgreSQL (None: not visible, an external server).
CpuClock = Callable[[], tuple[float, float | None]]


@dataclass
class Proofs:
    size: int
    first: list[float]  # ms, sorted
    warm: list[float]
    health: list[float]
    first_cpu: tuple[float, float | None] = (0.0, None)  # CPU µs per proof: server, PostgreSQL
    warm_cpu: tuple[float, float | None] = (0.0, None)


def _timed_cpu(
    client: LightClient, paths: list[str], clock: CpuClock, spent: list[float | None]
) -> list[float]:
    """:func:`timed`, adding the server's and PostgreSQL's CPU seconds over it to ``spent``."""
    before = clock()
    out = timed(client, paths)
    after = clock()
    spent[0] = (spent[0] or 0.0) + after[0] - before[0]
    pg = None if after[1] is None or before[1] is None else after[1] - before[1]
    spent[1] = None if pg is None else (spent[1] or 0.0) + pg
    return out


def _per_request(spent: list[float | None], n: int) -> tuple[float, float | None]:
    server, pg = spent
    return (server or 0.0) / n * 1e6, None if pg is None else pg / n * 1e6


def measure_proofs(url: str, requests: int, n_verify: int, rng: random.Random, clock: CpuClock) -> Proofs:
    """Proof latency as bench/proofs.py times it: 200 warm-up requests, then proofs of random indexes
    and /healthz in alternating blocks of 100, then the same proofs again; a sample verified. The CPU
    time the server and PostgreSQL spend on the proof blocks is counted too (wall-clock latency on a
    loaded machine varies; CPU per request much less)."""
    with httpx.Client(base_url=url, timeout=60) as client, LightClient(url) as light:
        vkey = client.get("/v1/log/key").text.strip()
        cp = checkpoint.open_checkpoint(
            client.get("/v1/log/checkpoint").text, note.parse_verifier_key(vkey), None
        )
        paths = [
            f"/v1/log/proof/inclusion?index={rng.randrange(cp.size)}&size={cp.size}" for _ in range(requests)
        ]
        warmup = [
            f"/v1/log/proof/inclusion?index={rng.randrange(cp.size)}&size={cp.size}" for _ in range(200)
        ]
        timed(light, warmup + ["/healthz"] * 200)
        first: list[float] = []
        health: list[float] = []
        first_cpu: list[float | None] = [0.0, 0.0]
        for b in range(0, requests, 100):
            health += timed(light, ["/healthz"] * len(paths[b : b + 100]))
            first += _timed_cpu(light, paths[b : b + 100], clock, first_cpu)
        warm: list[float] = []
        warm_cpu: list[float | None] = [0.0, 0.0]
        for b in range(0, requests, 100):
            warm += _timed_cpu(light, paths[b : b + 100], clock, warm_cpu)
        verify_sample(client, cp, [rng.randrange(cp.size) for _ in range(n_verify)])
    return Proofs(
        cp.size,
        sorted(first),
        sorted(warm),
        sorted(health),
        _per_request(first_cpu, requests),
        _per_request(warm_cpu, requests),
    )


async def settled(dsn: str, limit: float = 600) -> int:
    """The log's size once the server has integrated and projected every entry (its own service cards
    at start-up, the ingested cards at the end; the next fill moves both on from there)."""
    conn = await asyncpg.connect(dsn)
    try:
        t0 = time.perf_counter()
        while True:
            row = await conn.fetchrow(
                "SELECT (SELECT next_index FROM log_sequence) AS sequenced, "
                "(SELECT max(size) FROM checkpoints) AS integrated, "
                "(SELECT next_index FROM projection_state WHERE name = 'log') AS projected"
            )
            assert row is not None
            if row["integrated"] == row["sequenced"] == row["projected"]:
                return int(row["sequenced"])
            if time.perf_counter() - t0 > limit:
                raise RuntimeError(f"the server did not catch up with its log within {limit} s: {dict(row)}")
            await asyncio.sleep(0.05)
    finally:
        await conn.close()


async def log_size(dsn: str) -> int:
    """Entries in the log at ``dsn`` (0 before the schema exists)."""
    conn = await asyncpg.connect(dsn)
    try:
        n: int = await conn.fetchval("SELECT next_index FROM log_sequence")
    except asyncpg.UndefinedTableError:
        n = 0
    finally:
        await conn.close()
    return n


@dataclass
class Step:
    fill: Fill
    proofs: Proofs  # a server reading tiles on first use
    warmed: Proofs  # a server that warmed its proof cache at start
    phases: list[Phase]
    load: float  # 1-minute load average when the measurements ended

    def ingest(self, batch: int) -> Phase | None:
        return next((p for p in self.phases if p.batch == batch), None)


COLD_ENV = {**SERVER_ENV, "TRUSTSCORE_TILE_WARM_INTERVAL": "0"}


def server_clock(server: ServeProcess, pg_pid: int | None) -> CpuClock:
    """CPU seconds of the server process and (embedded) PostgreSQL, for the proof passes' CPU figures."""
    assert server.proc is not None
    pid = server.proc.pid

    def clock() -> tuple[float, float | None]:
        return cpu_seconds(pid), None if pg_pid is None else tree_cpu_seconds(pg_pid)

    return clock


def wait_for_line(path: Path, offset: int, text: str, limit: float = 600) -> str:
    """The first line holding ``text`` that the server writes to ``path`` after ``offset``."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        with path.open("rb") as f:
            f.seek(offset)
            for line in f.read().decode(errors="replace").splitlines():
                if text in line:
                    return json.loads(line).get("msg", line) if line.startswith("{") else line
        time.sleep(0.1)
    raise RuntimeError(f"the server wrote no {text!r} line in {limit:.0f} s")


def measure_size(
    args: argparse.Namespace, dsn: str, data_dir: Path, target: int, cards: list[bytes], rng: random.Random
) -> Step:
    filled = asyncio.run(fill(dsn, data_dir, target, args.check_tree_upto))
    if filled.end > filled.start:
        mib = (filled.database_bytes[1] - filled.database_bytes[0]) / 2**20
        n = filled.end - filled.start
        print(
            f"  filled {n:,} entries in {filled.seconds:.1f} s ({n / filled.seconds:,.0f} entries/s), "
            f"VACUUM (ANALYZE) {filled.vacuum_seconds:.1f} s, database +{mib:,.0f} MiB "
            f"({mib / n * 1e6:,.0f} MiB per 10^6 entries); {filled.checked} synthetic entries projected "
            "to no rows, so the projection was moved past them",
            flush=True,
        )
        us = [f"{c / n * 1e6:.1f}" if c is not None else "n/a" for c in filled.cpu]
        known = sum(c for c in filled.cpu if c is not None)
        print(
            f"  fill CPU per entry: this process {us[0]} µs, generating workers {us[1]} µs, PostgreSQL "
            f"backend {us[2]} µs; {known / n * 1e6:.0f} CPU-s per 10^6 entries (>= "
            f"{known / n * 1e6 / (os.cpu_count() or 1):.0f} s per 10^6 on {os.cpu_count()} idle CPUs)",
            flush=True,
        )
    pg_pid = None if args.database_url else int((data_dir / "pg" / "postmaster.pid").read_text().split()[0])
    log_path = data_dir / "serve.log"
    # First a server that reads every tile on first use (the proof cache not warmed at start): the cold
    # and warm passes measure a proof whose tiles are read from PostgreSQL, then held.
    server = ServeProcess(data_dir, dsn, log_path=log_path, env=COLD_ENV, start_timeout=600)
    t0 = time.perf_counter()
    with server:
        size = asyncio.run(settled(dsn))
        print(f"  server ready in {time.perf_counter() - t0:.1f} s, log of {size:,} entries", flush=True)
        proofs = measure_proofs(server.url, args.requests, args.verify, rng, server_clock(server, pg_pid))
        print(f"  proofs at {proofs.size:,}: p50 {percentile(proofs.first, 50):.2f} ms", flush=True)
        pg_us = [f"{c[1]:.0f}" if c[1] is not None else "n/a" for c in (proofs.first_cpu, proofs.warm_cpu)]
        print(
            f"  proof CPU per request, first pass / warm: server {proofs.first_cpu[0]:.0f} / "
            f"{proofs.warm_cpu[0]:.0f} µs, PostgreSQL {pg_us[0]} / {pg_us[1]} µs",
            flush=True,
        )
    # Then the server as deployed: it fills its free proof cache with the newest full tiles at start
    # (docs/tiles.md, "Proofs from memory"); new random proofs once that is done, then the ingest.
    offset = log_path.stat().st_size if log_path.exists() else 0
    server = ServeProcess(data_dir, dsn, log_path=log_path, env=SERVER_ENV, start_timeout=600)
    with server:
        asyncio.run(settled(dsn))
        warmed_line = wait_for_line(log_path, offset, "proof cache warmed")
        print(f"  {warmed_line}", flush=True)
        warmed = measure_proofs(server.url, args.requests, args.verify, rng, server_clock(server, pg_pid))
        print(
            f"  proofs on a warmed start: p50 {percentile(warmed.first, 50):.2f} ms "
            f"(server {warmed.first_cpu[0]:.0f} µs CPU per request)",
            flush=True,
        )
        wrk = tempfile.mkdtemp(prefix="growth-wrk-") if shutil.which("wrk") else None
        try:
            phases = asyncio.run(
                run_phases(
                    [server],
                    pg_pid,
                    args.ingest,
                    cards,
                    args.concurrency,
                    None if wrk is None else Path(wrk),
                    size,
                )
            )
        finally:
            if wrk is not None:
                shutil.rmtree(wrk, ignore_errors=True)
        asyncio.run(settled(dsn))
    return Step(filled, proofs, warmed, phases, os.getloadavg()[0])


# --- output ------------------------------------------------------------------------------------------------


def report(steps: list[Step], batches: list[int], verified: int) -> None:
    print()
    print("log size   = entries when the proofs were timed; ingest then appended on top of it")
    print("fill       = synthetic entries COPYed before this size (s, entries/s, MiB of database per 10^6)")
    print("ingest     = entries/s end to end over HTTP (server CPU µs per entry), real signed agent cards")
    print("proof      = GET /v1/log/proof/inclusion p50/p90 ms, a server reading each tile on first use")
    print("             (TRUSTSCORE_TILE_WARM_INTERVAL=0); warm = the same proofs again")
    print("warmed     = new random proofs on a server that warmed its proof cache at start (the default)")
    print(
        "-healthz   = proof p50 minus healthz p50, first pass / warm (the proof's own cost under this load)"
    )
    head = f"{'log size':>11} {'fill s':>7} {'fill/s':>8} {'MiB/1e6':>7}"
    head += "".join(f" {'ingest b' + str(b):>20}" for b in batches)
    head += f" {'proof p50/p90':>14} {'warm p50/p90':>13} {'warmed p50/p90':>14} {'healthz p50':>11}"
    head += f" {'-healthz':>11} {'load':>5}"
    print(head)
    for s in steps:
        f, p = s.fill, s.proofs
        n = f.end - f.start
        line = f"{p.size:>11,} {f.seconds:>7.1f} "
        line += f"{n / f.seconds:>8,.0f} " if n else f"{'-':>8} "
        mib = (f.database_bytes[1] - f.database_bytes[0]) / 2**20
        line += f"{mib / n * 1e6:>7,.0f}" if n else f"{'-':>7}"
        for b in batches:
            ph = s.ingest(b)
            line += (
                f" {'-':>20}"
                if ph is None
                else f" {ph.rate:>9,.0f} ({ph.cpu.server / ph.entries * 1e6:>5.0f} µs)"
            )
        line += f" {percentile(p.first, 50):>6.2f}/{percentile(p.first, 90):<7.2f}"
        line += f" {percentile(p.warm, 50):>5.2f}/{percentile(p.warm, 90):<7.2f}"
        line += f" {percentile(s.warmed.first, 50):>6.2f}/{percentile(s.warmed.first, 90):<7.2f}"
        health = percentile(p.health, 50)
        extra = f"{percentile(p.first, 50) - health:.2f}/{percentile(p.warm, 50) - health:.2f}"
        line += f" {health:>11.2f} {extra:>11} {s.load:>5.1f}"
        print(line)
    base = steps[0]
    print()
    print(
        f"ratio to {base.proofs.size:,} entries (goal: flat within 20 %, i.e. 0.80..1.20; ingest ratios are"
    )
    print("rates, so below 1 is slower; proof ratios are latencies, so above 1 is slower):")
    for s in steps[1:]:
        parts = []
        for b in batches:
            now, then = s.ingest(b), base.ingest(b)
            if now is not None and then is not None:
                parts.append(f"ingest batch {b} {now.rate / then.rate:.2f}x")
        for name, now_ms, then_ms, q in (
            ("proof p50", s.proofs.first, base.proofs.first, 50),
            ("p90", s.proofs.first, base.proofs.first, 90),
            ("warm proof p50", s.proofs.warm, base.proofs.warm, 50),
            ("p90", s.proofs.warm, base.proofs.warm, 90),
            ("warmed start p50", s.warmed.first, base.warmed.first, 50),
            ("healthz p50", s.proofs.health, base.proofs.health, 50),
        ):
            parts.append(f"{name} {percentile(now_ms, q) / percentile(then_ms, q):.2f}x")
        print(f"  {s.proofs.size:>11,}: " + ", ".join(parts))
    for s in steps:
        cold, warm, warmed = (percentile(x, 50) for x in (s.proofs.first, s.proofs.warm, s.warmed.first))
        print(
            f"proof p50 < 1 ms at {s.proofs.size:,}: tiles read on first use {cold:.2f} ms "
            f"({'met' if cold < 1 else 'not met'}), warm {warm:.2f} ms ({'met' if warm < 1 else 'not met'}), "
            f"warmed start {warmed:.2f} ms ({'met' if warmed < 1 else 'not met'}); "
            f"healthz {percentile(s.proofs.health, 50):.2f} ms"
        )
    print("synthetic entries: subscription revocations with a zero signature (log fsck would refuse them);")
    print(
        f"verified {verified} proofs at each size (leaf from /v1/log/entries) against its signed checkpoint: all valid"
    )


# --- main ----------------------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--sizes",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[100_000, 1_000_000, 10_000_000],
        help="log sizes to grow through and measure at, comma separated (default 100000,1000000,10000000)",
    )
    p.add_argument(
        "--ingest",
        type=pairs,
        default=pairs("1:2000,1000:20000"),
        help="batch size:entries posted at each size (default 1:2000,1000:20000)",
    )
    p.add_argument(
        "--concurrency", type=pairs, default=pairs("1:64,1000:2"), help="batch size:requests in flight"
    )
    p.add_argument("--requests", type=int, default=2000, help="timed proofs (and healthz) per size")
    p.add_argument("--verify", type=int, default=200, help="proofs verified against the checkpoint per size")
    p.add_argument(
        "--check-tree-upto",
        type=int,
        default=200_000,
        help="up to this size, compare every stored tree node with a rebuild from the leaves",
    )
    p.add_argument(
        "--real-cards",
        type=int,
        help="real signed agent cards posted over HTTP before the first fill "
        "(default: 1 %% of the first size)",
    )
    p.add_argument(
        "--database-url",
        help="a PostgreSQL server URL on which to CREATE a fresh database (default: embedded PostgreSQL)",
    )
    p.add_argument("--data-dir", type=Path, help="keep the log here; a later run grows it further")
    args = p.parse_args(argv)
    if args.sizes != sorted(args.sizes) or args.sizes[0] < 1:
        p.error("--sizes must be positive and increasing")
    if args.real_cards is None:
        args.real_cards = args.sizes[0] // 100
    if not 0 <= args.real_cards < args.sizes[0]:
        p.error("--real-cards must be >= 0 and below the first size")
    return args


def seed_cards(dsn: str, data_dir: Path, cards: list[bytes]) -> None:
    """Post ``cards`` to a fresh log over HTTP before its first fill. A log of revocations alone would
    give the planner statistics in which agent cards do not exist, which no real log has (and in which
    the webhook hook's lookup of each new card's previous card scans every card instead of one index
    entry: minutes per projection step of 5,000 cards)."""
    t0 = time.perf_counter()
    with ServeProcess(data_dir, dsn, log_path=data_dir / "serve.log", env=SERVER_ENV) as server:
        asyncio.run(post_all(server.url, bodies_for(cards, 1000), 2))
        asyncio.run(settled(dsn))
    print(f"posted {len(cards):,} real agent cards first ({time.perf_counter() - t0:.1f} s, not timed)")


def run(args: argparse.Namespace, data_dir: Path) -> None:
    dsn = kept_database(data_dir, args.database_url, "bench_growth")
    print(f"database: {dsn}", flush=True)
    per_size = sum(args.ingest.values())
    t0 = time.perf_counter()
    # Cards never posted to this log before: seeds from its size (a --data-dir log grows between runs),
    # far from those of bench/proofs.py's fill (1,000,000 on).
    have = asyncio.run(log_size(dsn))
    cards = presign(per_size * len(args.sizes) + args.real_cards, first_seed=2_000_000 + have)
    print(f"pre-signed {len(cards):,} distinct agent cards in {time.perf_counter() - t0:.1f} s (not timed)")
    rng = random.Random(6962)
    steps = []
    try:
        if have == 0 and args.real_cards:
            seed_cards(dsn, data_dir, cards[-args.real_cards :])
        for n, target in enumerate(args.sizes):
            print(f"size {target:,} (load average {os.getloadavg()[0]:.1f})", flush=True)
            steps.append(
                measure_size(args, dsn, data_dir, target, cards[n * per_size : (n + 1) * per_size], rng)
            )
    finally:
        if args.database_url and not args.data_dir:
            asyncio.run(drop_database(args.database_url, dsn))
    report(steps, list(args.ingest), args.verify)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print_header("trustscore bench: cost growth of ingest and inclusion proofs with the log's size")
    return in_data_dir(args.data_dir, lambda data_dir: run(args, data_dir))


if __name__ == "__main__":
    sys.exit(main())
