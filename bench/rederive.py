"""What deriving the evidence again costs at start-up (migration 0029), next to deriving it alone.

Starts ``trustscore serve`` on a fresh database, registers agents and POSTs every exam's report for each
(bench/service.py's agents and reports, no sandboxed items), waits until the ratings cover the log and
stops the server. Then, on the database as its owner, ``--repeat`` times:

- a start on current versions (what every start-up pays: one query, nothing derived again);
- the derivation alone: every projected leaf read and derived on a fresh projection state, nothing
  written (the baseline of the same run);
- the re-derivation: the recorded versions deleted, then
  :func:`trustscore.services.projector.rederive`, as a start-up after a derivation change runs it (one
  transaction: evidence and ladder rows deleted and written again);

and prints entries/s, evidence items/s, the ratio of the re-derivation to the derivation alone, and
whether the evidence and ladder rows are identical to what the server had projected (they must be).

    python bench/rederive.py                         # embedded PostgreSQL in a temporary directory
    python bench/rederive.py --agents 5000 --database-url postgresql://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

import asyncpg

from _common import fresh_server, print_header  # run as a script: bench/ is on sys.path
from service import SERVER_ENV, ingest, prepare
from trustscore.evidence.project_log import ProjectionState, project
from trustscore.ledger import keys
from trustscore.services.projector import rederive
from trustscore.store.projection_tables import project_leaves

#: What the server projected, as one digest per table (row order fixed), to compare after each run.
DIGESTS = {
    "evidence": "SELECT count(*), md5(coalesce(string_agg(e::text, '|' ORDER BY idx, seq), '')) FROM evidence e",
    "ladder": "SELECT count(*), md5(coalesce(string_agg(l::text, '|' ORDER BY idx, pos), '')) FROM ladder l",
}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--agents", type=int, default=2000, help="agents, each reporting every exam once")
    p.add_argument("--repeat", type=int, default=3, help="timed rounds (best and median printed)")
    p.add_argument("--in-flight", type=int, default=2, help="reports in flight while filling the log")
    p.add_argument("--database-url", help="a PostgreSQL server to create (and drop) a fresh database on")
    return p.parse_args(argv)


async def digests(conn: asyncpg.Connection) -> dict[str, tuple[int, str]]:
    return {table: tuple(await conn.fetchrow(sql) or ()) for table, sql in DIGESTS.items()}


async def derive_alone(conn: asyncpg.Connection, log_public_key: bytes, size: int) -> tuple[float, int]:
    """Seconds to read every projected leaf (as a projection does: no card's) and derive it on a fresh
    state, writing nothing; and the evidence items derived."""
    t0 = time.perf_counter()
    state = ProjectionState(log_public_key)
    items = 0
    for start in range(0, size, 5000):
        leaves = await project_leaves(conn, start, min(size - start, 5000))
        items += len(project(leaves, state, verify=False).evidence)
    return time.perf_counter() - t0, items


async def measure(dsn: str, log_public_key: bytes, repeat: int) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        size: int = await conn.fetchval("SELECT next_index FROM projection_state WHERE name = 'log'")
        served = await digests(conn)
        if not size or not served["evidence"][0] or not served["ladder"][0]:
            raise RuntimeError(f"nothing to derive again: {size} entries, {served}")
        current, alone, again = [], [], []
        items = 0
        identical = True
        for _ in range(repeat):
            t0 = time.perf_counter()
            if await rederive(dsn, log_public_key) is not None:
                raise RuntimeError("the evidence was derived again on current versions")
            current.append(time.perf_counter() - t0)
            seconds, items = await derive_alone(conn, log_public_key, size)
            alone.append(seconds)
            await conn.execute("DELETE FROM projection_versions")
            t0 = time.perf_counter()
            if await rederive(dsn, log_public_key) != size:
                raise RuntimeError("the re-derivation did not cover the projected log")
            again.append(time.perf_counter() - t0)
            identical = identical and await digests(conn) == served
    finally:
        await conn.close()
    print(f"{size:,} entries, {served['evidence'][0]:,} evidence items, {served['ladder'][0]:,} ladder rows")
    print(
        f"  {'start on current versions':<30}best {min(current) * 1e3:.1f} ms  "
        f"median {statistics.median(current) * 1e3:.1f} ms"
    )
    for name, runs in (("derivation alone (no writes)", alone), ("re-derivation at start-up", again)):
        best = min(runs)
        print(
            f"  {name:<30}best {best:.2f} s  median {statistics.median(runs):.2f} s  "
            f"{size / best:,.0f} entries/s  {items / best:,.0f} items/s"
        )
    print(f"  re-derivation / derivation alone = {min(again) / min(alone):.2f}x (best of each)")
    print(f"  evidence and ladder rows identical to the server's projection: {identical}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print_header(f"bench/rederive.py: {args.agents} agents, every exam reported once each")
    prep = prepare(args.agents, 0)
    with tempfile.TemporaryDirectory(prefix="trustscore-bench-") as tmp:
        data_dir = Path(tmp) / "data"
        with fresh_server(args.database_url, "bench_rederive", data_dir, SERVER_ENV) as server:
            phases, _ = asyncio.run(ingest(server, prep, args.in_flight))
            print(f"  {phases[0].reports} reports, {phases[0].items} items posted", flush=True)
            server.stop()  # (the database goes on running until the block ends)
            assert server.database_url is not None
            log_key = keys.read_key_file(data_dir / "log.key")
            asyncio.run(measure(server.database_url, log_key.public_key, args.repeat))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
