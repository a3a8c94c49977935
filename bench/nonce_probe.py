"""PostgreSQL's cost of a report's pre-grading nonce probe as the log gains partitions, before and after.

Every exam report asks, before it is graded, whether its answers were logged already and whether its
nonce is used (``LogStore.entry_by_nonce_and_nonce_used``). Statements are planned at every execution
(``store/db.py``: ``force_custom_plan``). Until 2026-12-04 the probe joined the side table
``entry_nonces`` with the partitioned ``entries`` on ``idx``, which the planner cannot prune, so each plan
considered every partition (one per 2^20 log indexes). This bench migrates a fresh database, extends it
to each ``--partitions`` count, and times ``--calls`` probes of unknown nonces with the previous statement
(the baseline of the run) and with the store's method, alternately, on one connection: the server
backend's CPU per call (read from /proc when PostgreSQL runs on this machine, else not shown), the
wall time per call, and their ratio.

    PYTHONPATH=src python bench/nonce_probe.py                       # embedded PostgreSQL, temporary dir
    PYTHONPATH=src python bench/nonce_probe.py --database-url postgresql://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import asyncpg

from _common import drop_database, embedded_dsn, fresh_database, print_header  # bench/ is on sys.path
from trustscore.errors import StorageError
from trustscore.store import db, embedded
from trustscore.store.log import LogStore

# The probe as it was before 2026-12-04 (store/log.py at 5dcb478).
BEFORE = (
    "SELECT found.idx, found.leaf, found.leaf_hash, EXISTS (SELECT 1 FROM entry_nonces "
    "WHERE signer = $3 AND nonce = $4) AS used FROM (SELECT 1) AS one LEFT JOIN (SELECT e.idx, "
    "e.leaf, e.leaf_hash FROM entry_nonces n JOIN entries e ON e.idx = n.idx "
    "WHERE n.signer = $1 AND n.nonce = $2) AS found ON true"
)
SIGNER = "ts1_" + "0" * 40


def backend_cpu(pid: int) -> float | None:
    """Seconds of CPU the backend ``pid`` has used (user + system), None if /proc cannot tell."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / 100  # clock ticks of 10 ms


async def timed(
    calls: int, pid: int, probe: Callable[[int], Awaitable[object]]
) -> tuple[float | None, float]:
    """Backend CPU and wall µs per call of ``probe``."""
    cpu, start = backend_cpu(pid), time.perf_counter()
    for i in range(calls):
        await probe(i)
    wall = (time.perf_counter() - start) / calls * 1e6
    end = backend_cpu(pid)
    return (None if cpu is None or end is None else (end - cpu) / calls * 1e6), wall


async def run(dsn: str, partition_counts: list[int], calls: int, rounds: int) -> None:
    await db.migrate(dsn)
    pool = await db.create_pool(dsn, min_size=1, max_size=1)  # one backend, as the service's pools set it
    try:
        store = LogStore(pool)
        async with pool.acquire() as conn:
            pid = await conn.fetchval("SELECT pg_backend_pid()")
        span = int(await pool.fetchval("SELECT value FROM log_meta WHERE key = 'partition_span'"))

        async def before(i: int) -> object:
            return await pool.fetchrow(BEFORE, SIGNER, f"b{i}", SIGNER, f"c{i}")

        async def after(i: int) -> object:
            return await store.entry_by_nonce_and_nonce_used(SIGNER, f"a{i}", SIGNER, f"c{i}")

        for count in partition_counts:
            # Partitions [0, count): the one holding the last index and the one after it.
            await pool.fetchval("SELECT covered FROM trustscore_extend_partitions($1)", (count - 2) * span)
            have = await pool.fetchval(
                "SELECT count(*) FROM pg_inherits WHERE inhparent = 'entries'::regclass"
            )
            for probe in (before, after):  # warm the catalog caches and the statement cache
                await timed(20, pid, probe)
            figures: dict[str, list[tuple[float | None, float]]] = {"before": [], "after": []}
            for _ in range(rounds):
                figures["before"].append(await timed(calls, pid, before))
                figures["after"].append(await timed(calls, pid, after))
            best = {k: (min_or_none([c for c, _ in v]), min(w for _, w in v)) for k, v in figures.items()}
            (cpu_b, wall_b), (cpu_a, wall_a) = best["before"], best["after"]
            if cpu_b is None or cpu_a is None:
                cpu = "backend CPU not readable here"
            elif cpu_a == 0 or cpu_b == 0:
                cpu = "backend CPU below the 10 ms clock tick (more --calls)"
            else:
                cpu = f"backend CPU {cpu_b:,.0f} -> {cpu_a:,.0f} µs/call ({cpu_b / cpu_a:.1f}x)"
            print(
                f"{have} partitions of entries: {cpu}; wall {wall_b:,.0f} -> {wall_a:,.0f} µs/call"
                f" ({wall_b / wall_a:.1f}x)  [best of {rounds} x {calls} calls each]"
            )
    finally:
        await pool.close()


def positive(text: str) -> int:
    """A whole number of at least 1 (an argparse type: a bad value is a one-line usage error)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1: {value}")
    return value


def counts(text: str) -> list[int]:
    """Rising partition counts of at least 2, comma-separated."""
    try:
        values = [int(part) for part in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"not comma-separated whole numbers: {text!r}") from None
    if any(v < 2 for v in values) or values != sorted(set(values)):
        raise argparse.ArgumentTypeError(f"rising counts of at least 2: {text!r}")
    return values


def min_or_none(values: list[float | None]) -> float | None:
    known = [v for v in values if v is not None]
    return min(known) if known else None


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--database-url", help="an external server (a fresh database is made there, then dropped)")
    p.add_argument(
        "--partitions", type=counts, default="2,12,22", help="partition counts to measure at, rising (>= 2)"
    )
    p.add_argument("--calls", type=positive, default=2000, help="probes per timing")
    p.add_argument("--rounds", type=positive, default=3, help="alternating timings of each statement")
    args = p.parse_args()
    print_header("the report's nonce probe: PostgreSQL's cost as partitions are added")
    with tempfile.TemporaryDirectory(prefix="trustscore-bench-") as tmp:
        data = Path(tmp) / "data"
        try:
            dsn = (
                asyncio.run(fresh_database(args.database_url, "bench_nonce_probe"))
                if args.database_url
                else embedded_dsn(data)
            )
        except (OSError, asyncpg.PostgresError, StorageError) as exc:
            print(f"error: no database: {exc}", file=sys.stderr)
            return 1
        try:
            asyncio.run(run(dsn, args.partitions, args.calls, args.rounds))
        except (OSError, asyncpg.PostgresError, StorageError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        finally:
            if args.database_url:
                asyncio.run(drop_database(args.database_url, dsn))
            else:
                embedded.stop(data / "pg")  # before its directory goes
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
