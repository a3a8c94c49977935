"""The event loop while a service takes the ratings over, and during an hourly time refresh: its longest stall.

A process that takes the ``ratings`` lease over (or starts on a large log) reads every evidence item
and recomputes every agent in its first ``RatingService.refresh``: seconds of CPU. This bench fills a
projection stand-in with ``--agents`` × ``--items`` synthetic evidence rows, applies the server's
cycle-collector settings (``cli/serve.tune_gc``), and runs that refresh beside a coroutine that wakes
every 5 ms: it prints how long the refresh took (the baseline of the run) and the longest time the
event loop could not run, and their ratio. Before 2026-12-02 the whole refresh ran on the loop (ratio
1.0: ``/healthz`` unanswered for its duration); scoring, grouping and the projector's reload now run in
worker threads (docs/operations.md, "takeover, while it lasts").

Then the service's hourly time refresh (``RatingService.recompute_all``), published into a table that
stores nothing: until 2026-12-04 its kept ratings and rows were built, encoded and the replaced ones
freed on the loop (1.8-2.1 s of stall at 10^5 agents and three models); now only dict updates are.

    PYTHONPATH=src python bench/takeover.py [--agents 10000] [--items 100]
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import sys

from _common import NoRatingTable, print_header, stalled  # run as a script: bench/ is on sys.path
from trustscore.cli.serve import tune_gc
from trustscore.kinds.graded import DIMENSIONS
from trustscore.scoring.inputs import EvidenceItem
from trustscore.services.metrics import Metrics
from trustscore.services.ratings import RELEASED_MODELS, RatingService, load_models
from trustscore.store.projection_tables import EvidenceRow

AT = dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC)


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


async def measure(agents: int, items: int, models: tuple[str, ...]) -> list[tuple[str, float, float]]:
    """The first refresh, then an hourly time refresh, each published into a table that stores nothing
    (as the ``ratings`` lease holder publishes): each one's seconds and longest event-loop stall."""
    now = [AT]
    ratings = RatingService(
        Projected(agents, items),  # type: ignore[arg-type]
        load_models(names=models),
        Metrics(),
        clock=lambda: now[0],
        table=NoRatingTable(),  # type: ignore[arg-type]
    )
    _, took, stall = await stalled(ratings.refresh())
    out = [("first refresh, published", took, stall)]
    now[0] = AT + dt.timedelta(hours=1)
    _, took, stall = await stalled(ratings.recompute_all())
    out.append(("time refresh 1 h later, published", took, stall))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=10_000)
    parser.add_argument("--items", type=int, default=100, help="evidence items per agent")
    parser.add_argument(
        "--models", default=",".join(RELEASED_MODELS), help="served models (default: the released ones)"
    )
    args = parser.parse_args()
    print_header("trustscore bench: the event loop during a takeover's first rating refresh")
    tune_gc()
    models = tuple(args.models.split(","))
    print(
        f"{args.agents:,} agents x {args.items} items ({args.agents * args.items:,} rows), {', '.join(models)}"
    )
    for label, took, stall in asyncio.run(measure(args.agents, args.items, models)):
        print(
            f"  {label:<36} {took:6.2f} s, longest event-loop stall {stall * 1000:5.0f} ms"
            f" = {stall / took:.2f} x the refresh"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
