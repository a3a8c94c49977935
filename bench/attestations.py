"""What a rating attestation costs the server, by the number of entries the rating is computed from.

Starts ``trustscore serve`` (one uvicorn worker) on a fresh database; registers a marketplace (approved
by the operator's log key) and one agent per ``--entries`` size, and appends that many ``delivered``
events of the marketplace about each agent, signed and appended to the log as the server appends them
(straight into the log store: the write limits per address would pace the bench, not the server). Once
every rating covers the log, for each agent: ``GET /v1/agents/{id}/rating/attestation``, the first read
(the bundle is made, verified and sent) and ``--requests`` reads after it, one at a time over one
keep-alive connection, and the same for ``format=vc``. It prints the bundle's entries and bytes, each
read's latency and the server's CPU per read.

Run it with the code before and after a change (``PYTHONPATH=<code>/src``) to compare; with code that
reuses a bundle for a while, the reads after the first are served the kept one.

    python bench/attestations.py --entries 1000,5000 --requests 5
    python bench/attestations.py --database-url postgresql://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

import asyncpg
import httpx
import msgspec

from _common import LightClient, fresh_server, print_header  # run as a script: bench/ is on sys.path
from ingest import cpu_seconds
from service import SERVER_ENV
from trustscore.cli.agent import card_envelope
from trustscore.devserver import ServeProcess
from trustscore.errors import StorageError
from trustscore.kinds.approvals import make_approval
from trustscore.kinds.events import make_event
from trustscore.kinds.parties import make_party_card
from trustscore.ledger import dsse, keys
from trustscore.ledger.submission import check
from trustscore.ledger.submission import prepare as prepare_entry
from trustscore.store import db
from trustscore.store.log import LogStore

BATCH = 1000  # envelopes appended per call
MCP_MAX = 4 * 1024 * 1024  # the largest request the MCP SDK reads over HTTP (its default)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--database-url",
        help="a PostgreSQL server URL on which to CREATE a fresh database (default: embedded PostgreSQL)",
    )
    p.add_argument(
        "--entries", default="100,1000,5000", help="events per agent, one agent each, comma-separated"
    )
    p.add_argument("--requests", type=int, default=5, help="reads after the first, per agent and format")
    p.add_argument(
        "--mcp-verify",
        action="store_true",
        help="also verify each bundle (one that fits the MCP SDK's 4 MiB requests) by the MCP tool "
        "verify_attestation, timing GET /healthz of the same server meanwhile",
    )
    args = p.parse_args(argv)
    try:
        args.sizes = [int(n) for n in args.entries.split(",")]
    except ValueError:
        p.error(f"--entries: not whole numbers: {args.entries!r}")
    if not args.sizes or min(args.sizes) < 1 or args.requests < 0:
        p.error("--entries needs sizes >= 1 and --requests >= 0")
    return args


def _signed(key: keys.SigningKey, statement: bytes) -> bytes:
    return msgspec.json.encode(dsse.sign(statement, [key]))


async def fill(server: ServeProcess, sizes: list[int]) -> list[str]:
    """One agent per size with that many events of an approved marketplace; the agents' ids."""
    assert server.database_url is not None
    log_key = keys.read_key_file(server.data_dir / "log.key")
    market = keys.SigningKey.generate()
    agents = [keys.SigningKey.generate() for _ in sizes]
    signers = {k.id: k.public_key for k in (log_key, market, *agents)}
    envelopes = [
        _signed(market, make_party_card(market.public_key, "bench market", "marketplace")),
        _signed(log_key, make_approval(operator=log_key.id, marketplace=market.id, action="approve")),
        *(msgspec.json.encode(card_envelope(a, f"bench agent {i}")) for i, a in enumerate(agents)),
    ]
    for agent, size in zip(agents, sizes, strict=True):
        envelopes += [
            _signed(
                market,
                make_event(
                    marketplace=market.id,
                    agent=agent.id,
                    event="delivered",
                    ref=f"order-{i}",
                    occurred_at="2026-11-22T00:00:00Z",
                ),
            )
            for i in range(size)
        ]
    pool = await db.create_pool(server.database_url, min_size=1, max_size=2)
    last = -1
    try:
        for i in range(0, len(envelopes), BATCH):
            entries = [
                check(prepare_entry(msgspec.json.decode(e)), lambda kid: signers[kid])
                for e in envelopes[i : i + BATCH]
            ]
            last = (await LogStore(pool).append(entries))[-1].index
    finally:
        await pool.close()
    async with httpx.AsyncClient(base_url=server.url, timeout=60) as client:
        t0 = time.perf_counter()
        for agent in agents:
            while True:
                r = await client.get(f"/v1/agents/{agent.id}/rating")
                if r.status_code == 200 and r.json()["log_size"] > last:
                    break
                if time.perf_counter() - t0 > 600:
                    raise RuntimeError(f"the rating of {agent.id} did not cover {last + 1} entries in 600 s")
                await asyncio.sleep(0.05)
    return [a.id for a in agents]


def reads(server: ServeProcess, path: str, requests: int) -> tuple[list[float], list[float], int, bytes]:
    """Latencies and server CPU of ``1 + requests`` reads of ``path``, its status and its first body."""
    assert server.proc is not None
    latencies, cpu = [], []
    with LightClient(server.url, timeout=600) as client:
        first_status, first_body = 0, b""
        for i in range(1 + requests):
            c0, t0 = cpu_seconds(server.proc.pid), time.perf_counter()
            status, body = client.get(path)
            latencies.append(time.perf_counter() - t0)
            cpu.append(cpu_seconds(server.proc.pid) - c0)
            if i == 0:
                first_status, first_body = status, body
    return latencies, cpu, first_status, first_body


def mcp_verify(server: ServeProcess, bundle: bytes) -> tuple[float, float, float, list[float]] | None:
    """The MCP tool ``verify_attestation`` on ``bundle`` (one JSON-RPC call to ``/mcp``): its latency and
    the server's CPU, alone; then its latency again while ``GET /healthz`` is sent one after another from
    another thread, and their latencies (a verification on the event loop holds every other request up);
    None if the call is larger than the SDK reads."""
    assert server.proc is not None
    call = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "tools/call",
        "params": {"name": "verify_attestation", "arguments": {"bundle": bundle.decode()}},
    }
    body = msgspec.json.encode(call)
    if len(body) > MCP_MAX:
        return None
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}

    def verify() -> float:
        t0 = time.perf_counter()
        r = httpx.post(f"{server.url}/mcp/", content=body, headers=headers, timeout=600)
        result = r.json().get("result", {}) if r.status_code == 200 else {}
        if result.get("isError") or not result.get("structuredContent", {}).get("verified"):
            raise RuntimeError(f"the MCP verification failed: {r.status_code} {r.text[:300]}")
        return time.perf_counter() - t0

    c0 = cpu_seconds(server.proc.pid)
    alone = verify()
    cpu = cpu_seconds(server.proc.pid) - c0
    done = threading.Event()
    health: list[float] = []

    def probe() -> None:
        with LightClient(server.url) as client:
            while not done.is_set():
                t0 = time.perf_counter()
                client.get("/healthz")
                health.append(time.perf_counter() - t0)

    prober = threading.Thread(target=probe)
    prober.start()
    try:
        time.sleep(0.2)
        beside = verify()
        time.sleep(0.2)
    finally:
        done.set()
        prober.join()
    return alone, cpu, beside, health


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print_header("trustscore bench: rating attestations by the entries they hold")
    rows = []
    verified: list[tuple[int, int, float, float, float, list[float]]] = []
    with tempfile.TemporaryDirectory(prefix="trustscore-bench-") as tmp:
        try:
            with fresh_server(
                args.database_url, "bench_attestations", Path(tmp) / "data", SERVER_ENV
            ) as server:
                agents = asyncio.run(fill(server, args.sizes))
                for size, agent in zip(args.sizes, agents, strict=True):
                    for fmt in ("bundle", "vc"):
                        path = f"/v1/agents/{agent}/rating/attestation?format={fmt}"
                        rows.append((size, fmt, *reads(server, path, args.requests)))
                        status, bundle = rows[-1][-2:]
                        if args.mcp_verify and fmt == "bundle" and status == 200:
                            timed = mcp_verify(server, bundle)
                            if timed is not None:
                                verified.append((size, len(bundle), *timed))
        except (OSError, asyncpg.PostgresError, asyncpg.InterfaceError, StorageError) as exc:
            print(f"error: {exc}", file=sys.stderr)  # no database, or it went away
            return 1
    print(
        f"{'events':>7} {'format':>6} {'status':>6} {'entries':>8} {'bytes':>11} "
        f"{'first ms':>9} {'first CPU ms':>12} {'again p50 ms':>12} {'again CPU ms':>12}"
    )
    for size, fmt, latencies, cpu, status, body in rows:
        entries = len(msgspec.json.decode(body).get("entries", [])) if status == 200 else 0
        again = (
            f"{statistics.median(latencies[1:]) * 1e3:>12.2f} {statistics.fmean(cpu[1:]) * 1e3:>12.2f}"
            if len(latencies) > 1
            else f"{'-':>12} {'-':>12}"
        )
        print(
            f"{size:>7} {fmt:>6} {status:>6} {entries:>8} {len(body):>11,} "
            f"{latencies[0] * 1e3:>9.1f} {cpu[0] * 1e3:>12.1f} {again}"
        )
    if verified:
        print("\nMCP verify_attestation alone, then beside GET /healthz sent one after another:")
        print(
            f"{'events':>7} {'bytes':>11} {'alone ms':>9} {'CPU ms':>8} {'beside ms':>9} {'healthz':>8} "
            f"{'p50 ms':>7} {'max ms':>7}"
        )
        for size, length, alone, spent, beside, health in verified:
            print(
                f"{size:>7} {length:>11,} {alone * 1e3:>9.1f} {spent * 1e3:>8.1f} {beside * 1e3:>9.1f} "
                f"{len(health):>8} {statistics.median(health) * 1e3:>7.2f} {max(health) * 1e3:>7.1f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
