"""The public reads that list agents, with many registered agents that have no evidence (free keys).

Starts ``trustscore serve`` (one uvicorn worker) on a fresh database, registers ``--idle`` agents with a
signed card and nothing else (keys are free: anyone can register thousands), and ``--rated`` agents that
each sit every public exam once (``bench/service.py``'s agents and reports), waits until every rating
covers the log, then times, one request at a time over one keep-alive connection:

* ``GET /v1/leaderboard?limit=100``, ``GET /`` (the home page shows the top ten) and ``GET /leaderboard``
  (the page): the first read after a change (a new card registered just before: the kept board is made
  again) and the reads after it, at the same log size;
* ``GET /v1/agents/{id}/rating`` of random idle agents, and ``GET /v1/agents?after=...&limit=100``;
* ``GET /v1/search/agents`` for a query matching every id (``ts1``), one matching nothing and one agent's id;
* ``GET /v1/stats/outcomes?group_by=exam&floor=N`` with a new floor at each request (the outcome stats of
  the log's ladder rows: the rated agents' graded items);
* with ``--runs N``, each rated agent first gets N re-verification runs, signed by the server's
  re-verifier key and appended to its log as the re-verifier appends them (a day apart up to now, every
  tenth a mismatch: what N days of daily runs leave; the rows of every listing show each agent's status,
  read from all its runs however its card stands: the bench's cards declare no endpoint);
* then, with the server stopped and started again on the same database, the first read of each route
  that names or lists every agent (the home page, the agent search, a card with its look-alike warnings,
  the leaderboard, the home page's search), ``--settle`` seconds after it is ready (default at once).

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
import hashlib
import random
import statistics
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
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
from trustscore.kinds.reverification import PrivateItem, ReverifiedItem, make_reverification
from trustscore.kinds.reverification.security import SecurityState
from trustscore.ledger import dsse, keys, statements
from trustscore.ledger.submission import check
from trustscore.ledger.submission import prepare as prepare_entry
from trustscore.store import db
from trustscore.store.log import LogStore


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
    p.add_argument(
        "--runs",
        type=int,
        default=0,
        help="re-verification runs logged for each rated agent before the reads, a day apart (default 0)",
    )
    p.add_argument(
        "--settle",
        type=float,
        default=0.0,
        help="seconds from the restart's readiness to its first reads (default 0: at once)",
    )
    args = p.parse_args(argv)
    if args.settle < 0:
        p.error("--settle must be at least 0")
    if args.runs < 0:
        p.error("--runs must be at least 0")
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


def _run(key: keys.SigningKey, agent: str, day: int, first: datetime) -> bytes:
    """A re-verification statement of ``agent`` (10 public items, 3 private: the server's defaults), ``day``
    days after ``first``; every tenth a mismatch. Each run has a seed of its own (a checkpoint root of its
    own), as the re-verifier's runs do: their evidence keys differ and none repeats the one before it."""
    observed = 0 if day % 10 == 9 else 1000
    return make_reverification(
        verifier=key.id,
        agent=agent,
        report_index=0,
        report_sha256="22" * 32,
        exam="reliability",
        exam_version=1,
        exam_digest="sha256:" + "ab" * 32,
        endpoint="https://agent.example/ask",
        trigger="schedule",
        checkpoint_size=2,  # covers the report and the entry after it
        checkpoint_root=hashlib.sha256(day.to_bytes(8, "big")).digest(),
        items=[
            ReverifiedItem(
                item_id=f"item-{i}",
                dimension="reliability",
                reported_millis=1000,
                observed_millis=observed,
                matched=observed == 1000,
                error=None,
            )
            for i in range(10)
        ],
        private_items=[
            PrivateItem(
                exam="probe@1",
                exam_digest="sha256:" + "cd" * 32,
                item_id=f"private-{i}",
                dimension="security",
                grader="injection@1",
                value_millis=1000,
                result="success",
                error=None,
            )
            for i in range(3)
        ],
        security_before=SecurityState(),
        ran_at=statements.format_time(first + timedelta(days=day)),
        nonce=f"bench-{agent}-{day}",
    )


async def log_runs(server: ServeProcess, agents: list[str], runs: int) -> int:
    """``runs`` re-verification runs for each of ``agents``, signed by the server's re-verifier key and
    appended to its log, the last of them now; the index of the last."""
    assert server.database_url is not None
    key = keys.read_key_file(server.data_dir / "reverify.key")
    pool = await db.create_pool(server.database_url, min_size=1, max_size=2)
    last = -1
    first = datetime.now(UTC) - timedelta(days=runs - 1)
    try:
        for agent in agents:
            envelopes = [dsse.sign(_run(key, agent, day, first), [key]) for day in range(runs)]
            appended = await LogStore(pool).append(
                [check(prepare_entry(msgspec.to_builtins(e)), lambda _: key.public_key) for e in envelopes]
            )
            last = max(last, appended[-1].index)
    finally:
        await pool.close()
    return last


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
    if args.runs:
        t0 = time.perf_counter()
        last = asyncio.run(log_runs(server, rated, args.runs))
        asyncio.run(_wait_ratings(url, rated, last + 1))  # their evidence projected, every rating refreshed
        print(f"logged {args.runs} runs for each rated agent in {time.perf_counter() - t0:.1f} s", flush=True)
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
    # The agent search: a query matching every id ("ts1"), one matching nothing, one a name of its own.
    # Before 2026-12-07 each scanned and sorted every agent on the event loop.
    some = rng.choice(idle + rated)
    for route, query in (("q=ts1 (every id)", "ts1"), ("q=zzqq (nothing)", "zzqq"), ("q=<an id>", some)):
        searches = [f"/v1/search/agents?q={query}&limit=50"] * args.requests
        out.append(timed(url, pid, f"GET /v1/search/agents?{route}", searches, args.requests, args.seconds))
    # Outcome stats over every ladder row of the log (the rated agents' graded items), a floor of its own
    # at each request: before 6ca9dee each (grouping, floor) read the log's ladder rows again.
    floors = [f"/v1/stats/outcomes?group_by=exam&floor={f}" for f in range(1, args.requests + 1)]
    out.append(
        timed(url, pid, "GET /v1/stats/outcomes, a new floor each", floors, args.requests, args.seconds)
    )
    return out + after_restart(server, args, idle + rated)


async def _wait_ratings(url: str, agents: list[str], size: int) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=600) as client:
        await wait_ratings(client, agents, size)


def after_restart(server: ServeProcess, args: argparse.Namespace, agents: list[str]) -> list[Timed]:
    """Stop the server and start it again on the same database, then time the first read of each route
    that names or lists every agent, in this order (what a process does once after it starts)."""
    server.stop()
    server.start()
    assert server.proc is not None
    pid, url = server.proc.pid, server.url
    time.sleep(args.settle)
    print(f"server started again on the same database; first reads {args.settle:g} s after", flush=True)
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
