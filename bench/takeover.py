"""The event loop while a service takes the ratings over: its longest stall during the first refresh.

A process that takes the ``ratings`` lease over (or starts on a large log) reads every evidence item
and recomputes every agent in its first ``RatingService.refresh``: seconds of CPU. This bench fills a
projection stand-in with ``--agents`` × ``--items`` synthetic evidence rows, applies the server's
cycle-collector settings (``cli/serve.tune_gc``), and runs that refresh beside a coroutine that wakes
every 5 ms: it prints how long the refresh took (the baseline of the run) and the longest time the
event loop could not run, and their ratio. Before 2026-12-02 the whole refresh ran on the loop (ratio
1.0: ``/healthz`` unanswered for its duration); scoring, grouping and the projector's reload now run in
worker threads (docs/operations.md, "takeover, while it lasts").

    PYTHONPATH=src python bench/takeover.py [--agents 10000] [--items 100]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import sys
import time

from _common import print_header  # run as a script: bench/ is on sys.path
from trustscore.cli.serve import tune_gc
from trustscore.kinds.graded import DIMENSIONS
from trustscore.scoring.inputs import EvidenceItem
from trustscore.services.metrics import Metrics
from trustscore.services.ratings import RatingService, load_models
from trustscore.store.projection_tables import EvidenceRow

AT = dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC)
TICK = 0.005


class Projected:
    """The projection tables as the refresh reads them: every row projected already."""

    def __init__(self, agents: int, items: int) -> None:
        self.rows: list[EvidenceRow] = []
        for a in range(agents):
            agent = f"ts1_{a:040x}"
            for n in range(items):
                dimension = DIMENSIONS[n % len(DIMENSIONS)]
                item = EvidenceItem(
                    agent=agent,
                    dimension=dimension,
                    source="real-benchmark",
                    at=AT - dt.timedelta(days=n % 20),
                    value=((a * 7 + n) % 100) / 100,
                    key=f"{dimension}@1/q{n}",
                    issuer=f"ts1_{n % 50:040x}",
                )
                self.rows.append(EvidenceRow(len(self.rows), 0, item))

    async def projected_size(self) -> int:
        return len(self.rows)

    async def evidence_since(self, start: int, end: int) -> list[EvidenceRow]:
        return self.rows[start:end]

    async def snapshots_since(self, start: int, end: int) -> list[object]:
        return []


async def measure(agents: int, items: int) -> tuple[float, float]:
    """Seconds of the first refresh and of the longest event-loop stall during it."""
    ratings = RatingService(Projected(agents, items), load_models(), Metrics(), clock=lambda: AT)  # type: ignore[arg-type]
    longest = 0.0
    done = False

    async def ticker() -> None:
        nonlocal longest
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(TICK)
            now = time.perf_counter()
            longest, last = max(longest, now - last - TICK), now

    task = asyncio.create_task(ticker())
    await asyncio.sleep(4 * TICK)  # the ticker is running before the refresh starts
    start = time.perf_counter()
    await ratings.refresh(publish=False)
    took = time.perf_counter() - start
    done = True
    await task
    return took, max(0.0, longest)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=10_000)
    parser.add_argument("--items", type=int, default=100, help="evidence items per agent")
    args = parser.parse_args()
    print_header("trustscore bench: the event loop during a takeover's first rating refresh")
    tune_gc()
    took, stall = asyncio.run(measure(args.agents, args.items))
    print(
        f"{args.agents:,} agents x {args.items} items ({args.agents * args.items:,} rows): first refresh "
        f"{took:.2f} s, longest event-loop stall {stall * 1000:.0f} ms = {stall / took:.2f} x the refresh"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
