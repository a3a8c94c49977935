"""End-to-end append throughput of the log over real HTTP, next to the raw Ed25519 verify rate.

Starts ``trustscore serve`` on a fresh database, pre-signs distinct agent cards (signing is not timed),
POSTs them to /v1/log/entries in batches of 1, 100 and 1000 (batch 1 with wrk, one thread and a Lua script
handing out the pre-signed bodies, when wrk is installed, so the client does not eat the cores; httpx
otherwise and for batches), and prints entries per second for each,
the pynacl verification rate measured in the same run, their ratio, and how long after the last
response the integrator's checkpoint covered every entry (integration lag). See bench/README.md.

    python bench/ingest.py                          # embedded PostgreSQL in a temporary directory
    python bench/ingest.py --database-url postgresql://postgres@127.0.0.1:5432/test
    python bench/ingest.py --database-url postgresql://postgres@127.0.0.1:5432/test --api-processes 2

With ``--api-processes N`` the service is N ``serve --role api --reuse-port`` processes sharing one port
(the kernel spreads wrk's connections among them) and one ``serve --role worker``; the server CPU is
theirs together.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import asyncpg
import httpx
import msgspec
import nacl.signing

from _common import (  # run as a script: bench/ is on sys.path
    drop_database,
    embedded_dsn,
    encoded_cards,
    fresh_database,
    print_header,
)
from proofs import fill  # the fast fill of bench/proofs.py (other seeds: no statement is posted twice)
from trustscore.canonical import b64decode
from trustscore.devserver import ServeProcess, free_port
from trustscore.ledger import dsse

# The bench posts from one address far faster than a client may: lift the per-address allowance (the
# limiter stays in the request path). Each card is signed by its own key, so no key limit is reached.
SERVER_ENV = {"TRUSTSCORE_ADDRESS_RATE_PER_MINUTE": str(10**9)}


def _pairs(text: str) -> dict[int, int]:
    out = {}
    for part in text.split(","):
        k, _, v = part.partition(":")
        out[int(k)] = int(v)
    return out


def _count(text: str) -> int:
    n = int(text)
    if n < 0:
        raise argparse.ArgumentTypeError(f"expected a count >= 0, not {n}")
    return n


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--database-url",
        help="a PostgreSQL server URL on which to CREATE a fresh database (default: embedded PostgreSQL)",
    )
    p.add_argument(
        "--entries",
        type=_pairs,
        default=_pairs("1:4000,100:20000,1000:50000"),
        help="batch size:entries to post, comma separated (default 1:4000,100:20000,1000:50000)",
    )
    p.add_argument(
        "--concurrency",
        type=_pairs,
        default=_pairs("1:64,100:4,1000:2"),
        help="batch size:requests in flight (default 1:64,100:4,1000:2)",
    )
    p.add_argument(
        "--load",
        choices=("auto", "wrk", "httpx"),
        default="auto",
        help="load generator for batch 1: wrk if on PATH (auto), else httpx; batches always use httpx",
    )
    p.add_argument(
        "--prefill",
        type=int,
        default=0,
        help="entries to put in the log first, through the service layer as bench/proofs.py does "
        "(cost growth: compare runs at 0, 10^5, 10^6)",
    )
    p.add_argument(
        "--api-processes",
        type=_count,
        default=0,
        help="serve with N --role api processes on one port (SO_REUSEPORT) and one --role worker instead of "
        "one process of role all (needs --database-url)",
    )
    p.add_argument("--verify-sample", type=int, default=5000, help="signatures for the pynacl verify rate")
    p.add_argument("--keep", action="store_true", help="keep the bench database (external server only)")
    return p.parse_args(argv)


# --- the pieces --------------------------------------------------------------------------------------


def presign(total: int, first_seed: int = 1) -> list[bytes]:
    """``total`` distinct signed agent cards as JSON bytes, signed on every CPU (not timed); other
    ``first_seed`` values more than ``total / 2000`` apart give cards distinct from these."""
    chunk = 2000
    jobs = [(first_seed + i // chunk, min(chunk, total - i)) for i in range(0, total, chunk)]
    with ProcessPoolExecutor(max_workers=os.cpu_count()) as ex:
        return [e for part in ex.map(encoded_cards, jobs) for e in part]


def verify_rate(envelopes: list[bytes]) -> float:
    """Single-threaded pynacl Ed25519 verifications per second over real card signatures."""
    work = []
    for raw in envelopes:
        env = msgspec.json.decode(raw, type=dsse.Envelope)
        payload = b64decode(env.payload)
        card = msgspec.json.decode(payload)["predicate"]
        work.append(
            (
                b64decode(card["public_key"]),
                dsse.pae(env.payloadType, payload),
                b64decode(env.signatures[0].sig),
            )
        )
    best = 0.0
    for _ in range(3):
        t0 = time.perf_counter()
        for public, message, sig in work:
            nacl.signing.VerifyKey(public).verify(message, sig)
        best = max(best, len(work) / (time.perf_counter() - t0))
    return best


def _stat(pid: int | str) -> list[str]:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far."""
    fields = _stat(pid)
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu_seconds(root: int) -> float:
    """CPU time of ``root`` and its live children (PostgreSQL: the postmaster and its backends)."""
    total = 0.0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = _stat(entry.name)
        except OSError:
            continue
        if entry.name == str(root) or fields[1] == str(root):
            total += (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    return total


def machine_busy_seconds() -> float:
    """CPU seconds all CPUs spent not idle, from /proc/stat."""
    user, nice, system, _idle, _iowait, irq, softirq, steal = (
        int(x) for x in Path("/proc/stat").read_text().split("\n")[0].split()[1:9]
    )
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


@dataclass
class Cpu:
    """CPU seconds used by each party over one interval."""

    server: float
    postgres: float | None
    client: float
    machine: float

    @staticmethod
    def now(server_pids: list[int], pg_pid: int | None) -> Cpu:
        usage = resource.getrusage(resource.RUSAGE_SELF)
        children = resource.getrusage(resource.RUSAGE_CHILDREN)  # wrk, once it has exited
        return Cpu(
            sum(cpu_seconds(pid) for pid in server_pids),
            None if pg_pid is None else tree_cpu_seconds(pg_pid),
            usage.ru_utime + usage.ru_stime + children.ru_utime + children.ru_stime,
            machine_busy_seconds(),
        )

    def __sub__(self, other: Cpu) -> Cpu:
        pg = None if self.postgres is None or other.postgres is None else self.postgres - other.postgres
        return Cpu(self.server - other.server, pg, self.client - other.client, self.machine - other.machine)


@dataclass
class Wal:
    """PostgreSQL's WAL counters (``pg_stat_wal``, server-wide) and its checkpoints so far."""

    records: int
    fpi: int  # full-page images: a page's first change after a checkpoint writes the whole 8 KiB page
    bytes: int
    checkpoints: int

    @staticmethod
    async def now(dsn: str) -> Wal:
        conn = await asyncpg.connect(dsn)
        try:
            checkpoints = (  # PostgreSQL 17 moved the counts to their own view
                "SELECT num_timed + num_requested FROM pg_stat_checkpointer"
                if conn.get_server_version().major >= 17
                else "SELECT checkpoints_timed + checkpoints_req FROM pg_stat_bgwriter"
            )
            row = await conn.fetchrow(
                "SELECT wal_records, wal_fpi, wal_bytes::bigint AS wal_bytes,"
                f" ({checkpoints}) AS checkpoints FROM pg_stat_wal"
            )
        finally:
            await conn.close()
        assert row is not None
        return Wal(row["wal_records"], row["wal_fpi"], row["wal_bytes"], row["checkpoints"])

    def __sub__(self, other: Wal) -> Wal:
        return Wal(
            self.records - other.records,
            self.fpi - other.fpi,
            self.bytes - other.bytes,
            self.checkpoints - other.checkpoints,
        )


@dataclass
class Phase:
    batch: int
    entries: int
    in_flight: int
    seconds: float
    lag: float
    cpu: Cpu  # from the first request until the checkpoint covered the phase
    wal: Wal  # the same interval, server-wide (a shared server's other databases count too)

    @property
    def rate(self) -> float:
        return self.entries / self.seconds


async def post_all(url: str, bodies: list[bytes], in_flight: int) -> float:
    """POST every body with ``in_flight`` requests outstanding; return the wall-clock seconds."""
    queue = list(reversed(bodies))
    limits = httpx.Limits(max_connections=in_flight, max_keepalive_connections=in_flight)
    headers = {"content-type": "application/json"}
    async with httpx.AsyncClient(base_url=url, limits=limits, timeout=120) as client:

        async def worker() -> None:
            while queue:
                body = queue.pop()
                r = await client.post("/v1/log/entries", content=body, headers=headers)
                if r.status_code != 201:
                    raise RuntimeError(f"append refused ({r.status_code}): {r.text[:300]}")

        await client.get("/healthz")  # open a connection before the clock starts
        t0 = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(in_flight)))
        return time.perf_counter() - t0


# One wrk thread: every pre-signed body (one per line of the file given after ``--``) is formatted once in
# init and handed out in turn until each has been answered 201 (wrk resends a few bodies when it
# reconnects, answered 200 as duplicates); the first request and the last 201 are announced on stdout,
# as wrk itself would run on until its duration ends.
_LUA = """
local reqs = {}
local total, sent, created, again, bad, first = 0, 0, 0, 0, 0, ""
init = function(args)
  local headers = {["Content-Type"] = "application/json"}
  for line in io.lines(args[1]) do
    total = total + 1
    reqs[total] = wrk.format("POST", "/v1/log/entries", headers, line)
  end
end
request = function()
  sent = sent + 1
  if sent == 1 then
    io.write("WRKSTART\\n")
    io.flush()
  end
  return reqs[((sent - 1) % total) + 1]
end
response = function(status, headers, body)
  if status == 201 then
    created = created + 1
    if created == total then
      io.write(string.format("WRKDONE %d %d %s\\n", again, bad, first))
      io.flush()
    end
  elseif status == 200 then
    again = again + 1
  else
    bad = bad + 1
    if first == "" then first = status .. " " .. string.sub(string.gsub(body, "\\n", " "), 1, 300) end
  end
end
"""


def post_wrk(url: str, bodies: list[bytes], in_flight: int, workdir: Path) -> float:
    """POST every body once with wrk (one thread, ``in_flight`` connections); return the seconds from
    wrk's start until the last body's response."""
    if any(b"\n" in b for b in bodies):
        raise ValueError("wrk takes one body per line")
    lines, script = workdir / "bodies.txt", workdir / "post.lua"
    lines.write_bytes(b"\n".join(bodies) + b"\n")
    script.write_text(_LUA)
    argv = [
        "wrk",
        "-t1",
        f"-c{in_flight}",
        "-d600s",
        "--timeout",
        "30s",
        "-s",
        str(script),
        url,
        "--",
        str(lines),
    ]
    with subprocess.Popen(argv, stdout=subprocess.PIPE, text=True) as wrk:
        assert wrk.stdout is not None
        t0 = time.perf_counter()
        for line in wrk.stdout:
            if line.startswith("WRKSTART"):  # the first request, once the bodies are loaded
                t0 = time.perf_counter()
            elif line.startswith("WRKDONE "):
                seconds = time.perf_counter() - t0
                _, again, bad_count, first = line.rstrip("\n").split(" ", 3)
                bad = int(bad_count)
                break
        else:
            raise RuntimeError(f"wrk exited ({wrk.wait()}) before every response came back")
        wrk.send_signal(signal.SIGINT)  # stop it now rather than at the end of its duration
        wrk.communicate()
    if bad:
        raise RuntimeError(f"{bad} appends were refused, the first: {first}")
    if int(again):
        print(f"  wrk sent {again} bodies twice (answered 200, duplicate)", flush=True)
    return seconds


async def checkpoint_size(client: httpx.AsyncClient) -> int:
    r = await client.get("/v1/log/checkpoint")
    if r.status_code != 200:
        return 0
    return int(r.text.split("\n")[1])


async def wait_integrated(url: str, size: int, limit: float = 300) -> float:
    """Seconds until the latest checkpoint covers ``size`` entries (polled every 10 ms)."""
    t0 = time.perf_counter()
    async with httpx.AsyncClient(base_url=url, timeout=10) as client:
        while await checkpoint_size(client) < size:
            if time.perf_counter() - t0 > limit:
                raise RuntimeError(f"checkpoint did not reach {size} within {limit} s")
            await asyncio.sleep(0.01)
    return time.perf_counter() - t0


def bodies_for(envelopes: list[bytes], batch: int) -> list[bytes]:
    if batch == 1:
        return envelopes
    return [b"[" + b",".join(envelopes[i : i + batch]) + b"]" for i in range(0, len(envelopes), batch)]


async def run_phases(
    servers: list[ServeProcess],
    pg_pid: int | None,
    plan: dict[int, int],
    envelopes: list[bytes],
    in_flight: dict[int, int],
    wrk_dir: Path | None,
    before: int = 0,
) -> list[Phase]:
    """Each phase of ``plan`` in turn, on a log already holding ``before`` entries; batch 1 with wrk when
    ``wrk_dir`` is given (its scratch directory). Requests go to the first of ``servers``, whose CPU is
    counted together."""
    server = servers[0]
    pids = [s.proc.pid for s in servers if s.proc is not None]
    assert server.database_url is not None
    phases = []
    done = 0
    for batch, count in plan.items():
        bodies = bodies_for(envelopes[done : done + count], batch)
        n = in_flight.get(batch, 1)
        wal0 = await Wal.now(server.database_url)
        cpu0 = Cpu.now(pids, pg_pid)
        if batch == 1 and wrk_dir is not None:
            seconds = await asyncio.to_thread(post_wrk, server.url, bodies, n, wrk_dir)
        else:
            seconds = await post_all(server.url, bodies, n)
        done += count
        lag = await wait_integrated(server.url, before + done)
        cpu = Cpu.now(pids, pg_pid) - cpu0
        wal = await Wal.now(server.database_url) - wal0
        phases.append(Phase(batch, count, n, seconds, lag, cpu, wal))
        pg = "" if cpu.postgres is None else f", PostgreSQL {cpu.postgres / count * 1e6:,.0f} µs"
        print(
            f"  batch {batch}: {count} entries in {seconds:.2f} s; CPU per entry: server"
            f" {cpu.server / count * 1e6:,.0f} µs{pg}; WAL per entry {wal.bytes / count:,.0f} bytes,"
            f" {wal.records / count:.1f} records, {wal.fpi / count:.2f} full-page images;"
            f" {wal.checkpoints} checkpoints",
            flush=True,
        )
    return phases


def started(server: ServeProcess, timeout: float = 120) -> None:
    """Wait until ``server`` says its start-up is complete: on a shared port, ``/readyz`` may be answered
    by another process while this one is still starting (its start-up would then be timed)."""
    deadline = time.monotonic() + timeout
    while "Application startup complete" not in server.output():
        if server.proc is not None and server.proc.poll() is not None:
            raise SystemExit(f"{' '.join(server.argv)} exited during start-up (log: {server.log})")
        if time.monotonic() > deadline:
            raise SystemExit(f"{' '.join(server.argv)} did not finish starting in {timeout:.0f} s")
        time.sleep(0.05)


def serve_processes(data_dir: Path, dsn: str, api_processes: int) -> list[ServeProcess]:
    """One server of role all; or ``api_processes`` of role api on one port, then one worker."""
    if not api_processes:
        return [ServeProcess(data_dir, dsn, log_path=data_dir / "serve.log", env=SERVER_ENV)]
    api_env = SERVER_ENV | {"TRUSTSCORE_ROLE": "api", "TRUSTSCORE_REUSE_PORT": "1"}
    port = free_port()
    apis = [
        ServeProcess(data_dir, dsn, port=port, log_path=data_dir / f"api{i}.log", env=api_env)
        for i in range(api_processes)
    ]
    worker = ServeProcess(
        data_dir, dsn, log_path=data_dir / "worker.log", env=SERVER_ENV | {"TRUSTSCORE_ROLE": "worker"}
    )
    return [*apis, worker]


# --- main --------------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.api_processes and not args.database_url:
        print("--api-processes needs --database-url (processes of role api and worker share one database)")
        return 2
    print_header("trustscore bench: end-to-end appends over HTTP")
    plan: dict[int, int] = args.entries
    total = sum(plan.values())

    t0 = time.perf_counter()
    envelopes = presign(total + args.verify_sample)
    sample, envelopes = envelopes[total:], envelopes[:total]
    print(
        f"pre-signed {len(envelopes) + len(sample)} distinct agent cards in {time.perf_counter() - t0:.1f} s (not timed)"
    )
    verify = verify_rate(sample)
    print(f"pynacl verify (1 thread, VerifyKey(pk).verify): {verify:,.0f} signatures/s", flush=True)

    with tempfile.TemporaryDirectory(prefix="trustscore-bench-") as tmp:
        data_dir = Path(tmp) / "data"
        if args.database_url:
            dsn = asyncio.run(fresh_database(args.database_url, "bench_ingest"))
            where = f"external PostgreSQL, fresh database {dsn}"
        else:
            dsn = embedded_dsn(data_dir)
            where = f"embedded PostgreSQL in {data_dir / 'pg'}"
        pid_file = data_dir / "pg" / "postmaster.pid"
        pg_pid = None if args.database_url else int(pid_file.read_text().split()[0])
        print(f"database: {where}")
        servers = serve_processes(data_dir, dsn, args.api_processes)
        for server in servers:
            env = " ".join(
                f"{k}={v}" for k, v in server.env.items() if k != "TRUSTSCORE_ADDRESS_RATE_PER_MINUTE"
            )
            print(f"server:   {env + ' ' if env else ''}{' '.join(server.argv)}", flush=True)
        tool = args.load if args.load != "auto" else ("wrk" if shutil.which("wrk") else "httpx")
        print(f"load:     batch 1 with {tool}, batches with httpx", flush=True)
        wrk_dir = Path(tmp) if tool == "wrk" else None
        try:
            if args.prefill:
                asyncio.run(fill(dsn, data_dir, args.prefill))
                print(f"log prefilled with {args.prefill:,} entries (service layer, not timed)", flush=True)
            with contextlib.ExitStack() as running:
                for server in reversed(servers):  # the worker first: it migrates and binds the log key
                    running.enter_context(server)
                    started(server)
                phases = asyncio.run(
                    run_phases(servers, pg_pid, plan, envelopes, args.concurrency, wrk_dir, args.prefill)
                )
        finally:
            if args.database_url and not args.keep:
                asyncio.run(drop_database(args.database_url, dsn))

    print()
    print(
        f"{'batch':>6} {'in flight':>9} {'entries':>8} {'seconds':>8} {'entries/s':>10} {'e2e/verify':>10} "
        f"{'integration lag':>15}"
    )
    for ph in phases:
        print(
            f"{ph.batch:>6} {ph.in_flight:>9} {ph.entries:>8} {ph.seconds:>8.2f} {ph.rate:>10,.0f} "
            f"{ph.rate / verify:>10.2f} {ph.lag * 1000:>12.0f} ms"
        )
    print()
    print("CPU per entry, from the first request of a phase until its checkpoint (µs):")
    print(f"{'batch':>6} {'server':>8} {'postgres':>8} {'client':>8} {'machine':>8}")
    for ph in phases:
        c, n = ph.cpu, ph.entries / 1e6
        pg = "n/a" if c.postgres is None else f"{c.postgres / n:.0f}"
        print(f"{ph.batch:>6} {c.server / n:>8.0f} {pg:>8} {c.client / n:>8.0f} {c.machine / n:>8.0f}")
    print()
    print(f"pynacl verify/s (same run, 1 thread): {verify:,.0f} = {1e6 / verify:.0f} µs per signature")
    best = max(ph.rate for ph in phases if ph.batch == max(plan))
    print(f"batch {max(plan)}: {best:,.0f} entries/s end to end = {best / verify:.2f} x single-thread verify")
    ones, bigs = [ph for ph in phases if ph.batch == 1], [ph for ph in phases if ph.batch == max(plan)]
    if ones and bigs and max(plan) > 1:
        one, big = ones[0].cpu.server / ones[0].entries, bigs[0].cpu.server / bigs[0].entries
        print(
            f"server CPU per entry, batch 1 / batch {max(plan)}: {one * 1e6:.0f} / {big * 1e6:.0f} µs "
            f"= {one / big:.2f} x (goal: within 2 x)"
        )
    print("integration lag = time from the last response of a phase until /v1/log/checkpoint covers it.")
    print("machine = all CPU busy time (includes anything else running); postgres: embedded server only.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
