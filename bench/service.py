"""Rating queries per second and latency next to a trivial route of the same app; exam-report ingest.

Starts ``trustscore serve`` (one uvicorn worker) on a fresh database, registers agents with signed cards,
POSTs pre-signed exam reports that the server re-grades (reports/s and items/s; exams with sandboxed
python-tests items are timed apart), waits until every rating covers the log, then loads
GET /v1/agents/{id}/rating, the badge GET /v1/agents/{id}/badge.svg and the profile page GET /agents/{id}
for random agents, and GET /healthz, with 32 connections for a fixed time each (wrk with a Lua script
when installed, else one async httpx client) and prints req/s, p50/p90/p99 and each route's ratio to
/healthz. See bench/README.md.

    python bench/service.py                          # embedded PostgreSQL in a temporary directory
    python bench/service.py --database-url postgresql://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
import msgspec

from _common import fresh_server, percentile, print_header  # run as a script: bench/ is on sys.path
from ingest import cpu_seconds, machine_busy_seconds
from trustscore.cli.agent import card_envelope
from trustscore.devserver import ServeProcess
from trustscore.exams.loader import DEFAULT_PUBLIC_DIR, ExamDirs, list_exams
from trustscore.ledger import keys
from trustscore.sdk import agent_from_spec, run_exam
from trustscore.sdk.runner import RunResult, sign_run

BADGE, PROFILE = "GET /v1/agents/{id}/badge.svg", "GET /agents/{id} (page)"
AGENTS_FILE = DEFAULT_PUBLIC_DIR.parent / "examples" / "agents" / "scripted.py"
PERSONAS = ("good", "careless", "gullible", "bluffer")
SANDBOXED = "capability@1"  # python-tests items: the grader spawns a sandbox process per item
# The rate limiter stays in the request path but must not refuse the bench's own POSTs.
SERVER_ENV = {"TRUSTSCORE_ADDRESS_RATE_PER_MINUTE": str(10**9)}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--database-url",
        help="a PostgreSQL server URL on which to CREATE a fresh database (default: embedded PostgreSQL)",
    )
    p.add_argument("--agents", type=int, default=200, help="agents to register and examine (default 200)")
    p.add_argument(
        "--sandboxed-reports",
        type=int,
        default=16,
        help=f"{SANDBOXED} reports to ingest, timed apart (default 16; 0 skips them)",
    )
    # The server grades at most max(1, grading_slots // 2) reports per client address at once (2 by
    # default), and every bench client shares one address: more in flight would be answered 429.
    p.add_argument("--in-flight", type=int, default=2, help="report POSTs in flight (default 2)")
    p.add_argument(
        "--connections", type=int, default=32, help="concurrent connections for reads (default 32)"
    )
    p.add_argument("--duration", type=int, default=10, help="seconds per read run (default 10)")
    p.add_argument("--warmup", type=int, default=2, help="seconds of unmeasured load per route first")
    p.add_argument("--rounds", type=int, default=2, help="alternating healthz/rating runs (default 2)")
    p.add_argument(
        "--load",
        choices=("auto", "wrk", "httpx"),
        default="auto",
        help="load generator for reads: wrk if on PATH (auto), else httpx",
    )
    p.add_argument(
        "--profile",
        type=Path,
        help="after the timed rounds, py-spy the server during one more rating run; collapsed stacks here",
    )
    p.add_argument(
        "--profile-ingest",
        type=Path,
        help="py-spy the server while the reports without sandboxed items are ingested; collapsed stacks here",
    )
    p.add_argument("--ingest-only", action="store_true", help="stop after the ingest phases (no read load)")
    p.add_argument("--keep", action="store_true", help="keep the bench database (external server only)")
    return p.parse_args(argv)


# --- preparing agents and reports (not timed) ----------------------------------------------------------


@dataclass
class Prepared:
    keys: list[keys.SigningKey]
    cards: list[bytes]
    reports: list[tuple[bytes, int]]  # (signed report JSON, items) for the exams without a sandbox
    sandboxed: list[tuple[bytes, int]]


def prepare(n_agents: int, n_sandboxed: int) -> Prepared:
    """Agent keys and cards; every exam sat once per persona, each agent's reports signed from those runs.

    Agent ``i`` answers as persona ``i % 4``: the same responses, but a different agent id and signature,
    so every report is a distinct statement the server verifies and re-grades in full.
    """
    enc = msgspec.json.Encoder()
    agent_keys = [keys.SigningKey.generate() for _ in range(n_agents)]
    cards = [enc.encode(card_envelope(k, f"bench agent {i}")) for i, k in enumerate(agent_keys)]
    exams = list_exams(ExamDirs())
    runs: dict[str, list[RunResult]] = {}
    for persona in PERSONAS:
        agent = agent_from_spec(f"python:{AGENTS_FILE}:{persona}")
        for exam in exams:
            if exam.id != SANDBOXED or n_sandboxed:
                runs.setdefault(exam.id, []).append(run_exam(exam, agent))
    reports: list[tuple[bytes, int]] = []
    sandboxed: list[tuple[bytes, int]] = []
    for i, key in enumerate(agent_keys):
        for exam_id, persona_runs in runs.items():
            run = persona_runs[i % len(PERSONAS)]
            signed = (enc.encode(sign_run(run, key)), len(run.records))
            if exam_id != SANDBOXED:
                reports.append(signed)
            elif len(sandboxed) < n_sandboxed:
                sandboxed.append(signed)
    random.Random(0).shuffle(reports)  # interleave exams and agents as live traffic would
    return Prepared(agent_keys, cards, reports, sandboxed)


# --- ingest ------------------------------------------------------------------------------------------


@dataclass
class Ingest:
    name: str
    reports: int
    items: int
    in_flight: int
    seconds: float
    server_cpu: float
    last_index: int


async def register(client: httpx.AsyncClient, cards: list[bytes]) -> int:
    """Append every card in batches of 1000; return the last log index."""
    last = -1
    for i in range(0, len(cards), 1000):
        body = b"[" + b",".join(cards[i : i + 1000]) + b"]"
        r = await client.post("/v1/log/entries", content=body, headers={"content-type": "application/json"})
        if r.status_code != 201:
            raise RuntimeError(f"cards refused ({r.status_code}): {r.text[:300]}")
        last = max(last, *(e["index"] for e in r.json()["entries"]))
    return last


async def post_reports(
    client: httpx.AsyncClient, name: str, reports: list[tuple[bytes, int]], in_flight: int, server_pid: int
) -> Ingest:
    """POST every report with ``in_flight`` outstanding; each must come back 201 with all items graded."""
    queue = list(reversed(reports))
    last = -1
    items = 0
    again = 0

    async def worker() -> None:
        nonlocal last, items, again
        while queue:
            body, n = queue.pop()
            r = await client.post("/v1/reports", content=body, headers={"content-type": "application/json"})
            if r.status_code == 429 and "one report per signer" in r.text:
                # The shuffle put two reports of one agent in flight at once: that one goes to the back.
                queue.insert(0, (body, n))
                again += 1
                continue
            if r.status_code != 201:
                raise RuntimeError(f"report refused ({r.status_code}): {r.text[:300]}")
            graded = r.json()
            if len(graded["items"]) != n:
                raise RuntimeError(f"{n} items sent, {len(graded['items'])} graded")
            items += n
            last = max(last, graded["evidence_index"])

    cpu0, t0 = cpu_seconds(server_pid), time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(in_flight)))
    seconds, cpu = time.perf_counter() - t0, cpu_seconds(server_pid) - cpu0
    if again:
        print(f"  {again} report(s) answered 429 (another report of the same agent in flight) and sent again")
    return Ingest(name, len(reports), items, in_flight, seconds, cpu, last)


async def wait_ratings(client: httpx.AsyncClient, agents: list[str], size: int, limit: float = 300) -> float:
    """Seconds until the ratings cover ``size`` log entries; then check every agent has evidence."""
    t0 = time.perf_counter()
    while True:
        r = await client.get(f"/v1/agents/{agents[-1]}/rating")
        if r.status_code == 200 and r.json()["log_size"] >= size:
            break
        if time.perf_counter() - t0 > limit:
            raise RuntimeError(f"ratings did not cover {size} entries within {limit} s")
        await asyncio.sleep(0.01)
    waited = time.perf_counter() - t0
    for agent in agents:
        r = await client.get(f"/v1/agents/{agent}/rating")
        if r.status_code != 200 or not r.json()["n"]:
            raise RuntimeError(f"no rating with evidence for {agent}: {r.status_code} {r.text[:300]}")
    return waited


def spy(pid: int, output: Path) -> subprocess.Popen[bytes]:
    """Start py-spy on ``pid`` (collapsed stacks, idle excluded) until it is sent SIGINT."""
    exe = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    argv = [
        exe,
        "record",
        "--pid",
        str(pid),
        "--gil",
        "--rate",
        "200",
        "--format",
        "raw",
        "--output",
        str(output),
    ]
    spying = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(1)  # py-spy attaches
    return spying


async def ingest(
    server: ServeProcess, prep: Prepared, in_flight: int, profile: Path | None = None
) -> tuple[list[Ingest], float]:
    assert server.proc is not None
    pid = server.proc.pid
    limits = httpx.Limits(max_connections=in_flight, max_keepalive_connections=in_flight)
    async with httpx.AsyncClient(base_url=server.url, limits=limits, timeout=300) as client:
        last = await register(client, prep.cards)
        print(f"registered {len(prep.cards)} agents (log index {last})", flush=True)
        spying = None if profile is None else spy(pid, profile)
        phases = [await post_reports(client, "without sandbox", prep.reports, in_flight, pid)]
        if spying is not None:
            spying.send_signal(signal.SIGINT)
            spying.wait()
            print(f"profiled the ingest of reports without sandboxed items: collapsed stacks in {profile}")
        print(f"  {phases[-1].reports} reports in {phases[-1].seconds:.2f} s", flush=True)
        if prep.sandboxed:
            phases.append(await post_reports(client, SANDBOXED, prep.sandboxed, in_flight, pid))
            print(f"  {phases[-1].reports} {SANDBOXED} reports in {phases[-1].seconds:.2f} s", flush=True)
        size = max(last, *(ph.last_index for ph in phases)) + 1
        lag = await wait_ratings(client, [k.id for k in prep.keys], size)
    return phases, lag


# --- read load ---------------------------------------------------------------------------------------


@dataclass
class Load:
    route: str
    tool: str
    requests: int
    seconds: float
    p50: float  # milliseconds
    p90: float
    p99: float
    max: float
    errors: int
    server_cpu: float  # seconds
    client_cpu: float  # seconds
    machine: float = 0.0  # busy CPU seconds of the whole machine (every process)

    @property
    def rate(self) -> float:
        return self.requests / self.seconds


_LUA = """
local paths = {%s}
local reqs = {}
init = function(args)
  for i, p in ipairs(paths) do reqs[i] = wrk.format("GET", p) end
  math.randomseed(%d)
end
request = function() return reqs[math.random(#reqs)] end
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    "WRKJSON {\\"requests\\":%%d,\\"duration_us\\":%%d,\\"p50\\":%%d,\\"p90\\":%%d,\\"p99\\":%%d,"
    .. "\\"max\\":%%d,\\"errors\\":%%d}\\n",
    summary.requests, summary.duration, latency:percentile(50), latency:percentile(90),
    latency:percentile(99), latency.max, e.connect + e.read + e.write + e.status + e.timeout))
end
"""


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_wrk(url: str, paths: list[str], connections: int, seconds: int, workdir: Path) -> Load:
    """One wrk thread with ``connections`` keep-alive connections, each request a random path."""
    script = workdir / "paths.lua"
    script.write_text(_LUA % (",".join(json.dumps(p) for p in paths), random.randrange(1 << 30)))
    argv = ["wrk", "-t1", f"-c{connections}", f"-d{seconds}s", "--timeout", "10s", "-s", str(script), url]
    out = subprocess.run(argv, capture_output=True, text=True, check=True).stdout
    line = next((x for x in out.splitlines() if x.startswith("WRKJSON ")), None)
    if line is None:
        raise RuntimeError(f"no summary from wrk:\n{out}")
    s = json.loads(line.removeprefix("WRKJSON "))
    return Load(
        "",
        "wrk",
        s["requests"],
        s["duration_us"] / 1e6,
        s["p50"] / 1000,
        s["p90"] / 1000,
        s["p99"] / 1000,
        s["max"] / 1000,
        s["errors"],
        0.0,
        0.0,
    )


async def _httpx_load(url: str, paths: list[str], connections: int, seconds: int) -> Load:
    limits = httpx.Limits(max_connections=connections, max_keepalive_connections=connections)
    latencies: list[float] = []
    errors = 0
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=10) as client:
        await asyncio.gather(*(client.get(paths[0]) for _ in range(connections)))  # open the pool
        deadline = time.perf_counter() + seconds

        async def worker() -> None:
            nonlocal errors
            choice = random.choice
            while (t0 := time.perf_counter()) < deadline:
                r = await client.get(choice(paths))
                latencies.append(time.perf_counter() - t0)
                errors += r.status_code != 200

        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(connections)))
        elapsed = time.perf_counter() - t0
    ms = sorted(x * 1000 for x in latencies)
    return Load(
        "",
        "httpx",
        len(ms),
        elapsed,
        percentile(ms, 50),
        percentile(ms, 90),
        percentile(ms, 99),
        ms[-1],
        errors,
        0.0,
        0.0,
    )


def load(
    tool: str,
    server: ServeProcess,
    route: str,
    paths: list[str],
    connections: int,
    seconds: int,
    workdir: Path,
) -> Load:
    """Load ``paths`` for ``seconds``; the server's and the load generator's CPU time are measured too."""
    assert server.proc is not None
    usage = resource.getrusage(resource.RUSAGE_SELF)
    self0 = usage.ru_utime + usage.ru_stime
    child0, server0, machine0 = children_cpu(), cpu_seconds(server.proc.pid), machine_busy_seconds()
    if tool == "wrk":
        result = run_wrk(server.url, paths, connections, seconds, workdir)
        client = children_cpu() - child0
    else:
        result = asyncio.run(_httpx_load(server.url, paths, connections, seconds))
        usage = resource.getrusage(resource.RUSAGE_SELF)
        client = usage.ru_utime + usage.ru_stime - self0
    result.route = route
    result.server_cpu = cpu_seconds(server.proc.pid) - server0
    result.machine = machine_busy_seconds() - machine0
    result.client_cpu = client
    return result


def profile(
    server: ServeProcess, paths: list[str], args: argparse.Namespace, tool: str, workdir: Path
) -> None:
    """py-spy the server (collapsed stacks, idle excluded) while the rating route is under load."""
    assert server.proc is not None
    with spy(server.proc.pid, args.profile) as spying:
        result = load(tool, server, "rating (profiled)", paths, args.connections, args.duration, workdir)
        spying.send_signal(signal.SIGINT)
        spying.wait()
    print(f"profiled rating run: {result.rate:,.0f} req/s; collapsed stacks in {args.profile}", flush=True)


def read_load(server: ServeProcess, agents: list[str], args: argparse.Namespace, workdir: Path) -> list[Load]:
    tool = args.load if args.load != "auto" else ("wrk" if shutil.which("wrk") else "httpx")
    routes = {
        "GET /healthz": ["/healthz"],
        "GET /v1/agents/{id}/rating": [f"/v1/agents/{a}/rating" for a in agents],
        BADGE: [f"/v1/agents/{a}/badge.svg" for a in agents],
        PROFILE: [f"/agents/{a}" for a in agents],
    }
    print(f"read load: {tool}, {args.connections} connections, {args.duration} s per run", flush=True)
    if args.warmup > 0:
        for paths in routes.values():
            load(tool, server, "", paths, args.connections, args.warmup, workdir)
    results = []
    for n in range(args.rounds):
        for route, paths in routes.items():
            res = load(tool, server, route, paths, args.connections, args.duration, workdir)
            print(f"  round {n + 1} {route}: {res.rate:,.0f} req/s, p99 {res.p99:.2f} ms", flush=True)
            results.append(res)
    if args.profile:
        profile(server, routes["GET /v1/agents/{id}/rating"], args, tool, workdir)
    return results


# --- main --------------------------------------------------------------------------------------------


def report_ingest(phases: list[Ingest], lag: float) -> None:
    print(
        f"{'reports':<16} {'in flight':>9} {'reports':>8} {'items':>7} {'seconds':>8} {'reports/s':>10} "
        f"{'items/s':>8} {'server CPU/report':>18}"
    )
    for ph in phases:
        print(
            f"{ph.name:<16} {ph.in_flight:>9} {ph.reports:>8} {ph.items:>7} {ph.seconds:>8.2f} "
            f"{ph.reports / ph.seconds:>10,.1f} {ph.items / ph.seconds:>8,.0f} "
            f"{ph.server_cpu / ph.reports * 1000:>15.1f} ms"
        )
    print(f"ratings covered the whole log {lag * 1000:.0f} ms after the last report's response")


def report_reads(results: list[Load]) -> None:
    print(
        f"{'route':<27} {'tool':>5} {'requests':>8} {'req/s':>7} {'p50 ms':>7} {'p90 ms':>7} {'p99 ms':>7} "
        f"{'max ms':>7} {'errors':>6} {'server CPU':>10} {'server CPU/req':>14} {'client CPU/req':>14} "
        f"{'other CPU':>9}"
    )
    for r in results:
        print(
            f"{r.route:<27} {r.tool:>5} {r.requests:>8} {r.rate:>7,.0f} {r.p50:>7.2f} {r.p90:>7.2f} "
            f"{r.p99:>7.2f} {r.max:>7.1f} {r.errors:>6} {r.server_cpu / r.seconds:>10.0%} "
            f"{r.server_cpu / r.requests * 1e6:>11.0f} µs "
            f"{r.client_cpu / r.requests * 1e6:>11.0f} µs "
            f"{(r.machine - r.server_cpu - r.client_cpu) / r.seconds:>9.2f}"
        )
    best: dict[str, Load] = {}
    for r in results:
        if r.route not in best or r.rate > best[r.route].rate:
            best[r.route] = r
    health, rating = best["GET /healthz"], best["GET /v1/agents/{id}/rating"]
    ratio = rating.rate / health.rate
    print()
    print(
        f"best of {len(results) // len(best)} runs each: rating {rating.rate:,.0f} req/s, healthz {health.rate:,.0f} req/s"
    )
    print(f"rating / healthz = {ratio:.2f}  (target >= 0.80: {'met' if ratio >= 0.8 else 'MISSED'})")
    print(f"rating p99 = {rating.p99:.2f} ms  (target < 20 ms: {'met' if rating.p99 < 20 else 'MISSED'})")
    badge, page = best[BADGE], best[PROFILE]
    b_ratio = badge.rate / health.rate
    print(
        f"badge {badge.rate:,.0f} req/s, badge / healthz = {b_ratio:.2f}  "
        f"(target >= 0.80: {'met' if b_ratio >= 0.8 else 'MISSED'}); p99 {badge.p99:.2f} ms"
    )
    print(
        f"profile page {page.rate:,.0f} req/s, profile / healthz = {page.rate / health.rate:.2f}; "
        f"p99 = {page.p99:.2f} ms  (target < 20 ms: {'met' if page.p99 < 20 else 'MISSED'})"
    )
    cpu = {r.route: min(x.server_cpu / x.requests for x in results if x.route == r.route) for r in results}
    print(
        f"server CPU per request (least of the runs): rating {cpu[rating.route] * 1e6:.0f} µs, "
        f"healthz {cpu[health.route] * 1e6:.0f} µs; healthz/rating = {cpu[health.route] / cpu[rating.route]:.2f}"
        " (the rate ratio a saturated, uncontended worker would show)"
    )
    if any(r.errors for r in results):
        raise RuntimeError("some reads failed (non-2xx or socket errors); figures are not valid")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print_header("trustscore bench: rating queries and report ingest over HTTP")

    t0 = time.perf_counter()
    prep = prepare(args.agents, args.sandboxed_reports)
    print(
        f"prepared {len(prep.keys)} agents, {len(prep.reports)} reports without sandboxed items and "
        f"{len(prep.sandboxed)} {SANDBOXED} reports in {time.perf_counter() - t0:.1f} s (not timed)"
    )

    with tempfile.TemporaryDirectory(prefix="trustscore-bench-") as tmp:
        data_dir = Path(tmp) / "data"
        with fresh_server(args.database_url, "bench_service", data_dir, SERVER_ENV, keep=args.keep) as server:
            where = (
                f"external PostgreSQL, fresh database {server.database_url}"
                if args.database_url
                else f"embedded PostgreSQL in {data_dir / 'pg'}"
            )
            print(f"database: {where}")
            env = " ".join(f"{k}={v}" for k, v in SERVER_ENV.items())
            print(f"server:   {env} {' '.join(server.argv)}  (one uvicorn worker)", flush=True)
            reads: list[Load] = []
            phases, lag = asyncio.run(ingest(server, prep, args.in_flight, args.profile_ingest))
            if not args.ingest_only:
                reads = read_load(server, [k.id for k in prep.keys], args, Path(tmp))

    print()
    report_ingest(phases, lag)
    if args.ingest_only:
        return 0
    print()
    report_reads(reads)
    print("server CPU = share of one core used by the server process during the run (one worker);")
    print("client CPU = the load generator's CPU per request. All on the same cores as the server.")
    print("other CPU = cores busy with anything else (PostgreSQL, other processes) during the run;")
    print("well above 0 means the machine was not idle and the figures are low.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
