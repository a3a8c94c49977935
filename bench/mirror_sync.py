"""An API process's ratings mirror taking in a whole time refresh: its event loop and its memory.

Every API process keeps a copy of ``current_ratings`` (``services/rating_mirror.py``). An hourly time
refresh of the ``ratings`` lease holder rewrites every (agent, model) row (each has a new
``computed_at``), so each mirror then reads and decodes every row: at 10^5 agents and three models,
3 x 10^5 rows of 0.7-2.4 KB. This bench fills a rating service with synthetic evidence (the shape of
``bench/rating_refresh.py``), publishes its ratings into a real ``current_ratings`` table (a fresh
database on ``--database-url``, else the embedded PostgreSQL), then times two mirror syncs beside a
coroutine that wakes every 5 ms:

* a mirror starting empty (an API process starting) reading every row;
* the same mirror after the service's time refresh one hour later (every row rewritten).

For each it prints the rows read, the seconds the sync took (the baseline of the run), the longest time
the event loop could not run, their ratio, and the largest growth of the process's resident memory
seen during the sync; then the process's peak resident memory (service and mirror together), and
checks that the mirror serves exactly what the service computed.

    PYTHONPATH=src python bench/mirror_sync.py [--agents 20000] [--items 2] [--database-url URL]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import os
import sys
import tempfile
import time
from collections.abc import Awaitable
from pathlib import Path

import asyncpg

from _common import (  # bench/ is on sys.path
    drop_database,
    embedded_dsn,
    fresh_database,
    print_header,
    stalled,
)
from rating_refresh import AT, fill
from trustscore.cli.serve import tune_gc
from trustscore.errors import ConfigError, InvalidInput, StorageError
from trustscore.services.metrics import Metrics
from trustscore.services.rating_mirror import RatingMirror
from trustscore.services.ratings import RatingService, load_models
from trustscore.settings import SERVABLE_MODELS
from trustscore.store import db, embedded
from trustscore.store.ratings import RatingTable

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


def resident() -> int:
    """This process's resident memory in bytes (Linux: /proc/self/statm)."""
    return int(Path("/proc/self/statm").read_text().split()[1]) * PAGE_SIZE


def peak_resident() -> int:
    """This process's peak resident memory in bytes (Linux: VmHWM of /proc/self/status)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


async def watched(run: Awaitable[int]) -> tuple[int, float, float, int]:
    """``run``'s result, its seconds, the longest event-loop stall meanwhile and the largest growth of
    resident memory seen (bytes), sampled at each wake of the stall's ticker."""
    peak = start_rss = resident()

    def sample() -> None:
        nonlocal peak
        peak = max(peak, resident())

    rows, took, stall = await stalled(run, sample)
    sample()
    return rows, took, stall, peak - start_rss


def served(view: RatingService | RatingMirror) -> dict[str, dict[str, object]]:
    return {
        m: {a: (r.rating, r.medals, r.at, r.log_size) for a, r in kept.items()}
        for m, kept in view._ratings.items()
    }


async def measure(dsn: str, agents: int, items: int, models: tuple[str, ...]) -> bool:
    await db.migrate(dsn)
    pool = await db.create_pool(dsn)
    try:
        now = [AT]
        service = RatingService(
            None,  # type: ignore[arg-type]
            load_models(names=models),
            Metrics(),
            clock=lambda: now[0],
            table=RatingTable(pool),
        )
        fill(service, agents, items, future=False)
        started = time.perf_counter()
        await service.recompute_all()
        print(f"  service: first time refresh, written        {time.perf_counter() - started:6.2f} s")
        mirror = RatingMirror(RatingTable(pool), load_models(names=models), poll=3600.0)
        results = [("mirror starting empty", await watched(mirror.sync()))]
        now[0] = AT + dt.timedelta(hours=1)
        _, took, stall = await stalled(service.recompute_all())
        print(
            f"  service: time refresh 1 h later, written    {took:6.2f} s,"
            f" longest event-loop stall {stall * 1000:6.0f} ms = {stall / took:.2f} x the refresh"
        )
        results.append(("after the 1 h time refresh", await watched(mirror.sync())))
        for label, (rows, took, stall, grown) in results:
            print(
                f"  {label:<28} {rows:9,} rows {took:6.2f} s, longest event-loop stall {stall * 1000:6.0f} ms"
                f" = {stall / took:.2f} x the sync; resident memory +{grown / 2**20:,.0f} MiB"
            )
        print(f"  process peak resident memory (service and mirror): {peak_resident() / 2**20:,.0f} MiB")
        same = served(mirror) == served(service) and mirror.size == service.size
        print(f"  the mirror serves what the service computed: {same}")
        await mirror.close()
        return same
    finally:
        await pool.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=20_000)
    parser.add_argument("--items", type=int, default=2, help="evidence items per agent")
    parser.add_argument("--models", default=",".join(SERVABLE_MODELS), help="served models")
    parser.add_argument("--database-url", help="a server to create a fresh database on (default: embedded)")
    args = parser.parse_args()
    if args.agents < 1 or args.items < 1:
        parser.error("--agents and --items must be at least 1")
    models = tuple(args.models.split(","))
    try:
        load_models(names=models)
    except (ConfigError, InvalidInput) as exc:
        parser.error(f"--models: {exc}")
    print_header("trustscore bench: a ratings mirror taking in a whole time refresh")
    tune_gc()
    print(f"{args.agents:,} agents x {args.items} items, models {', '.join(models)}")
    with tempfile.TemporaryDirectory(prefix="trustscore-bench-") as tmp:
        data = Path(tmp) / "data"
        try:
            admin = args.database_url or embedded_dsn(data)
            dsn = asyncio.run(fresh_database(admin, "bench_mirror"))
        except (OSError, asyncpg.PostgresError, StorageError) as exc:
            print(f"error: no database: {exc}", file=sys.stderr)
            return 1
        try:
            ok = asyncio.run(measure(dsn, args.agents, args.items, models))
        except (OSError, asyncpg.PostgresError, StorageError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        finally:
            asyncio.run(drop_database(admin, dsn))
            if not args.database_url:
                embedded.stop(data / "pg")  # before its directory goes
    if not ok:
        print("the mirror differs from the service", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
