"""``trustscore log fsck --database-url`` at 1,000,000 entries: time, entries/s and peak memory.

fsck streams the log in batches (``trustscore.services.audit``), so its memory must not grow with the
log. Fills a fresh database like ``bench/proofs.py`` (real signed cards through the service's checks),
then runs the real CLI as a child process on a prefix-sized log and on the full log, and prints wall
time, entries/s and the child's peak RSS for each, with the ratios between them (the small run is the
baseline measured in the same run: time should scale with the entries, memory should not). It also
times a bare cursor read of every entry (the I/O floor fsck cannot beat).

    python bench/fsck.py                       # 1M entries (and a 100k baseline), embedded PostgreSQL
    python bench/fsck.py --entries 50000       # a quick run
    python bench/fsck.py --data-dir /tmp/ts-1m # reuse a log filled by an earlier run (also proofs.py's)
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from pathlib import Path

import asyncpg

from _common import (  # run as a script: bench/ is on sys.path
    drop_database,
    in_data_dir,
    kept_database,
    print_header,
)
from proofs import fill
from trustscore.services import logkey
from trustscore.settings import Settings


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--entries", type=int, default=1_000_000, help="log size (default 1,000,000)")
    p.add_argument("--baseline", type=int, default=0, help="baseline log size (default entries / 10)")
    p.add_argument("--database-url", help="a PostgreSQL server URL on which to CREATE fresh databases")
    p.add_argument("--data-dir", type=Path, help="keep the filled logs here for later runs")
    return p.parse_args(argv)


def fsck(dsn: str, data_dir: Path) -> tuple[float, int, str]:
    """Run the CLI's fsck on ``dsn``; (wall seconds, peak RSS in KiB of the child, its last line)."""
    key = logkey.load_or_create(Settings(data_dir=data_dir).log_key_file)
    from trustscore.ledger import note

    vkey = note.make_verifier_key(Settings().log_origin, key.public_key)
    t0 = time.perf_counter()
    r = subprocess.run(
        [sys.executable, "-c", CHILD, "log", "fsck", "--database-url", dsn, "--verifier-key", vkey],
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - t0
    if r.returncode != 0:
        raise RuntimeError(f"fsck failed: {r.stdout[-1000:]} {r.stderr[-1000:]}")
    return wall, int(r.stderr.split("VmHWM:")[1].split()[0]), r.stdout.strip().splitlines()[-1]


# The CLI, then its own peak RSS (VmHWM of the exec'd image: ru_maxrss of a child would include the
# pages of this large parent it was forked from).
CHILD = """
import sys
from trustscore.cli.main import main
code = main(sys.argv[1:])
print(next(l for l in open('/proc/self/status') if l.startswith('VmHWM:')), file=sys.stderr)
sys.exit(code)
"""


async def read_all(dsn: str) -> float:
    """Seconds to stream every entry through a cursor in 10,000-row batches (no checking)."""
    conn = await asyncpg.connect(dsn)
    try:
        t0 = time.perf_counter()
        async with conn.transaction(isolation="repeatable_read", readonly=True):
            cursor = await conn.cursor("SELECT idx, leaf, leaf_hash FROM entries ORDER BY idx")
            while await cursor.fetch(10_000):
                pass
        return time.perf_counter() - t0
    finally:
        await conn.close()


def prepared(args: argparse.Namespace, data_dir: Path, entries: int) -> str:
    dsn = kept_database(data_dir, args.database_url, f"bench_fsck_{entries}")
    asyncio.run(fill(dsn, data_dir, entries))
    return dsn


def run(args: argparse.Namespace, root: Path) -> None:
    baseline = args.baseline or max(1, args.entries // 10)
    rows = []
    for n in (baseline, args.entries):
        data_dir = root / f"fsck-{n}"
        dsn = prepared(args, data_dir, n)
        try:
            read = asyncio.run(read_all(dsn))
            wall, peak_kib, last = fsck(dsn, data_dir)
        finally:
            if args.database_url and not args.data_dir:  # nothing would remember it: drop it
                asyncio.run(drop_database(args.database_url, dsn))
        rows.append((n, wall, peak_kib, read))
        print(
            f"  {n:>9,} entries: fsck {wall:7.1f} s = {n / wall:8,.0f} entries/s, "
            f"peak RSS {peak_kib / 1024:6.1f} MiB; bare cursor read {read:5.1f} s  [{last}]",
            flush=True,
        )
    (n0, w0, m0, _), (n1, w1, m1, r1) = rows
    print(
        f"ratio {n1 / n0:.0f}x entries: time {w1 / w0:.2f}x, peak memory {m1 / m0:.2f}x; "
        f"fsck / bare read at {n1:,}: {w1 / r1:.1f}x"
    )


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print_header(f"trustscore bench: streamed fsck at {args.entries:,} entries")
    return in_data_dir(args.data_dir, lambda root: run(args, root))


if __name__ == "__main__":
    sys.exit(main())
