"""The public reads that list agents, with many registered agents that have no evidence (free keys).

Starts ``trustscore serve`` (one uvicorn worker) on a fresh database, registers ``--idle`` agents with a
signed card and nothing else (keys are free: anyone can register thousands), and ``--rated`` agents that
each sit every public exam once (``bench/service.py``'s agents and reports), waits until every rating
covers the log, then times, one request at a time over one keep-alive connection:

* ``GET /v1/leaderboard?limit=100``, ``GET /`` (the home page shows the top ten) and ``GET /leaderboard``
  (the page): the first read after a change (a new card registered just before: the kept board is made
  again) and the reads after it, at the same log size;
* ``GET /v1/agents/{id}/rating`` of random idle agents, and ``GET /v1/agents?after=...&limit=100``;
* then, with the server stopped and started again on the same database, the first read of each route
  that names or lists every agent (the home page, the agent search, a card with its look-alike warnings,
  the leaderboard, the home page's search).

For each route it prints requests, p50 and the largest latency and the server's CPU per request, and
the ratio of the leaderboard's p50 to ``GET /healthz``'s, measured in the same run. Each route stops
after ``--requests`` reads or ``--seconds`` seconds, whichever comes first (a read that costs seconds
would otherwise take the bench hours).

    python bench/leaderboard.py --idle 10000 --rated 200
    python bench/leaderboard.py --idle 10000 --rated 200 --database-url postgresql://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import httpx
import msgspec

from _common import (  # run as a script: bench/ is on sys.path
    LightClient,
    encoded_cards,
    fresh_server,
    print_header,
    signed_cards,
)
from ingest import cpu_seconds
from service import SERVER_ENV, post_reports, prepare, register, wait_ratings
from trustscore.canonical import b64decode
from trustscore.devserver import ServeProcess
from trustscore.errors import StorageError
from trustscore.ledger import statements


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--database-url", help="a PostgreSQL server URL on which to CREATE a fresh database")
    p.add_argument(
        "--idle", type=int, default=10_000, help="agents registered without evidence (default 10000)"
    )
    p.add_argument("--rated", type=int, default=200, help="agents that sit every public exam (default 200)")
    p.add_argument("--requests", type=int, default=50, help="reads per route at most (default 50)")
    p.add_argument("--seconds", type=float, default=20.0, help="seconds per route at most (default 20)")
    p.add_argument("--keep", action="store_true", help="keep the bench database (external server only)")
    args = p.parse_args(argv)
    for name in ("idle", "rated", "requests"):
        if getattr(args, name) < (1 if name != "idle" else 0):
            p.error(f"--{name} must be at least {1 if name != 'idle' else 0}")
    if args.seconds <= 0:
        p.error("--seconds must be positive")
    return args


@dataclass
class Timed:
    route: str
    latencies: list[float]  # seconds
    server_cpu: float  # seconds, all requests

    def line(self) -> str:
        n = len(self.latencies)
        return (
            f"{self.route:<56} {n:>8} {statistics.median(self.latencies) * 1e3:>9.2f} "
            f"{max(self.latencies) * 1e3:>9.2f} {self.server_cpu / n * 1e3:>14.2f}"
        )


def timed(url: str, pid: int, route: str, paths: list[str], requests: int, seconds: float) -> Timed:
    """GET ``paths`` in turn, one at a time, until ``requests`` reads or ``seconds`` have passed."""
    latencies = []
    with LightClient(url, timeout=600) as client:
        cpu0, start = cpu_seconds(pid), time.perf_counter()
        for i in range(requests):
            t0 = time.perf_counter()
            status, body = client.get(paths[i % len(paths)])
            latencies.append(time.perf_counter() - t0)
            if status != 200:
                raise RuntimeError(f"GET {paths[i % len(paths)]}: {status} {body[:300]!r}")
            if time.perf_counter() - start > seconds:
                break
        return Timed(route, latencies, cpu_seconds(pid) - cpu0)


async def fill(server: ServeProcess, args: argparse.Namespace) -> tuple[list[str], list[str]]:
    """Register the idle agents and the rated ones, post the rated ones' reports, wait for their ratings."""
    prep = prepare(args.rated, 0)
    seeds = [(seed, min(1000, args.idle - i)) for seed, i in enumerate(range(0, args.idle, 1000), start=1)]
    with ProcessPoolExecutor() as pool:
        idle_cards = [card for chunk in pool.map(encoded_cards, seeds) for card in chunk]
    assert server.proc is not None
    async with httpx.AsyncClient(base_url=server.url, timeout=600) as client:
        t0 = time.perf_counter()
        last = await register(client, idle_cards) if idle_cards else -1
        print(f"registered {len(idle_cards):,} idle agents in {time.perf_counter() - t0:.1f} s", flush=True)
        last = max(last, await register(client, prep.cards))
        phase = await post_reports(client, "reports", prep.reports, 2, server.proc.pid)
        print(f"rated {args.rated} agents: {phase.reports} reports in {phase.seconds:.1f} s", flush=True)
        await wait_ratings(client, [k.id for k in prep.keys], max(last, phase.last_index) + 1)
        idle = []
        after = None
        while True:  # every registered agent, a page at a time (the idle ones have no rating)
            r = await client.get("/v1/agents", params={"limit": 1000, **({"after": after} if after else {})})
            page = r.json()["agents"]
            if not page:
                break
            idle += [a["id"] for a in page]
            after = page[-1]["id"]
    rated = {k.id for k in prep.keys}
    return [a for a in idle if a not in rated], sorted(rated)


async def one_more_card(url: str, seed: int) -> None:
    """Register one more idle agent and wait until its card is projected: the next leaderboard read then
    makes its board again (a card read by id does not)."""
    [envelope] = signed_cards(seed, 1)
    agent = statements.parse_statement(b64decode(envelope.payload)).facts.subject
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        await register(client, [msgspec.json.encode(envelope)])
        for _ in range(3000):
            if (await client.get(f"/v1/agents/{agent}")).status_code == 200:
                return
            await asyncio.sleep(0.01)
    raise RuntimeError(f"the card of {agent} was not projected within 30 s")


def run(server: ServeProcess, args: argparse.Namespace) -> list[Timed]:
    idle, rated = asyncio.run(fill(server, args))
    assert server.proc is not None
    pid, url = server.proc.pid, server.url
    print(f"{len(idle):,} idle and {len(rated)} rated agents; one request at a time", flush=True)
    rng = random.Random(7)
    out = [timed(url, pid, "GET /healthz", ["/healthz"], args.requests, args.seconds)]
    seed = 10**6
    for route, path in (
        ("GET /v1/leaderboard?limit=100", "/v1/leaderboard?limit=100"),
        ("GET / (home page)", "/"),
        ("GET /leaderboard (page)", "/leaderboard"),
    ):
        # The first read after a registration (the board is made again), then reads of an unmoved log.
        firsts = []
        for _ in range(3):
            seed += 1
            asyncio.run(one_more_card(url, seed))
            firsts.append(timed(url, pid, route, [path], 1, args.seconds))
        out.append(
            Timed(
                f"{route}, first after a change",
                [t.latencies[0] for t in firsts],
                sum(t.server_cpu for t in firsts),
            )
        )
        out.append(timed(url, pid, f"{route}, again", [path], args.requests, args.seconds))
    if idle:
        paths = [f"/v1/agents/{a}/rating" for a in rng.sample(idle, min(len(idle), args.requests))]
        out.append(timed(url, pid, "GET /v1/agents/{idle}/rating", paths, args.requests, args.seconds))
    pages = [
        f"/v1/agents?limit=100&after={a}"
        for a in rng.sample(idle + rated, min(args.requests, len(idle + rated)))
    ]
    out.append(timed(url, pid, "GET /v1/agents?after=...&limit=100", pages, args.requests, args.seconds))
    return out + after_restart(server, args, idle + rated)


def after_restart(server: ServeProcess, args: argparse.Namespace, agents: list[str]) -> list[Timed]:
    """Stop the server and start it again on the same database, then time the first read of each route
    that names or lists every agent, in this order (what a process does once after it starts)."""
    server.stop()
    server.start()
    assert server.proc is not None
    pid, url = server.proc.pid, server.url
    print("server started again on the same database; first reads", flush=True)
    some = random.Random(11).choice(agents)
    return [
        timed(url, pid, f"{route}, first after a restart", [path], 1, args.seconds)
        for route, path in (
            ("GET / (home page)", "/"),
            ("GET /v1/search/agents?q=agent", "/v1/search/agents?q=agent"),
            ("GET /v1/agents/{id} (look-alikes)", f"/v1/agents/{some}"),
            ("GET /v1/leaderboard?limit=100", "/v1/leaderboard?limit=100"),
            ("GET /?q=agent (home page search)", "/?q=agent"),
        )
    ]


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print_header("trustscore bench: leaderboard and agent reads with idle registered agents")
    with tempfile.TemporaryDirectory(prefix="trustscore-bench-") as tmp:
        try:
            with fresh_server(
                args.database_url, "bench_leaderboard", Path(tmp) / "data", SERVER_ENV, keep=args.keep
            ) as server:
                results = run(server, args)
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, StorageError) as exc:
            print(f"error: {exc}", file=sys.stderr)  # no database, or it went away
            return 1
    print()
    print(f"{'route':<56} {'requests':>8} {'p50 ms':>9} {'max ms':>9} {'server CPU/req':>14}")
    for r in results:
        print(r.line() + " ms")
    health = statistics.median(results[0].latencies)
    board = statistics.median(results[2].latencies)
    print(f"ratio leaderboard p50 (again) / healthz p50: {board / health:.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
