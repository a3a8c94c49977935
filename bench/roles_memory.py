"""Memory of an ``--role api`` process as evidence grows: it serves ratings without holding evidence.

Starts a worker and an API process (``trustscore serve --role worker`` / ``--role api``) on a fresh
database, registers ``--agents`` agents and an operator-approved marketplace, and reads the resident set
size (VmRSS) of both processes; then logs ``--items`` marketplace events (one evidence item each, spread
over the agents, ``POST /v1/events`` from ``--threads`` threads), waits until the API process serves
ratings of the whole log, and reads both RSS again. The worker, which holds every evidence item in
memory to compute ratings, is the baseline measured in the same run: the figure is the API process's
growth per 1000 items and its ratio to the worker's.

    python bench/roles_memory.py --items 100000 --database-url postgresql://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import asyncpg
import httpx
import msgspec

from _common import drop_database, embedded_dsn, fresh_database, print_header
from trustscore.cli.agent import card_envelope
from trustscore.devserver import ServeProcess
from trustscore.kinds.approvals import make_approval
from trustscore.kinds.events import make_event
from trustscore.kinds.parties import make_party_card
from trustscore.ledger import dsse, keys
from trustscore.services import logkey


def rss_mib(proc: ServeProcess) -> float:
    """The process's resident set size, MiB (Linux /proc)."""
    assert proc.proc is not None
    for line in Path(f"/proc/{proc.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS")


def post(http: httpx.Client, path: str, envelopes: list[dsse.Envelope]) -> None:
    body = msgspec.json.encode(envelopes if len(envelopes) > 1 else envelopes[0])
    r = http.post(path, content=body)
    assert r.status_code == 201, r.text


async def ratings_size(dsn: str) -> int:
    conn = await asyncpg.connect(dsn)
    try:
        size: int = await conn.fetchval("SELECT log_size FROM ratings_state")
        log: int = await conn.fetchval("SELECT next_index FROM log_sequence")
        return size - log  # 0 once the ratings hold for the whole log
    finally:
        await conn.close()


def run(api: ServeProcess, worker: ServeProcess, dsn: str, args: argparse.Namespace) -> None:
    market = keys.SigningKey.generate()
    log_key = logkey.load_or_create(api.data_dir / "log.key")
    http = httpx.Client(base_url=api.url, timeout=600)
    post(
        http,
        "/v1/log/entries",
        [dsse.sign(make_party_card(market.public_key, "market", "marketplace"), [market])],
    )
    approval = make_approval(operator=log_key.id, marketplace=market.id, action="approve")
    post(http, "/v1/log/entries", [dsse.sign(approval, [log_key])])
    agents = [keys.SigningKey.generate() for _ in range(args.agents)]
    post(http, "/v1/log/entries", [card_envelope(a, f"agent {i}") for i, a in enumerate(agents)])
    time.sleep(2.0)  # settle: the registrations are projected, the mirror has synced
    before = rss_mib(api), rss_mib(worker)
    started = time.perf_counter()

    def send(first: int) -> None:
        with httpx.Client(base_url=api.url, timeout=600) as own:
            for i in range(first, args.items, args.threads):
                event = make_event(
                    marketplace=market.id,
                    agent=agents[i % len(agents)].id,
                    event="delivered",
                    ref=f"order-{i}",
                    occurred_at="2026-11-29T00:00:00Z",
                )
                post(own, "/v1/events", [dsse.sign(event, [market])])

    with ThreadPoolExecutor(args.threads) as pool:
        list(pool.map(send, range(args.threads)))
    while asyncio.run(ratings_size(dsn)) < 0:
        time.sleep(0.2)
    print(
        f"logged and rated {args.items} evidence items in {time.perf_counter() - started:.1f} s", flush=True
    )
    time.sleep(2.0)  # the API process syncs its mirror
    after = rss_mib(api), rss_mib(worker)
    for name, b, a in (("api", before[0], after[0]), ("worker", before[1], after[1])):
        per = (a - b) / args.items * 1000
        print(
            f"{name:<7} RSS before {b:.1f} MiB, after {args.items} items {a:.1f} MiB: {per:+.3f} MiB per 1000 items"
        )
    growth_api, growth_worker = after[0] - before[0], after[1] - before[1]
    ratio = growth_api / growth_worker if growth_worker > 0 else float("nan")
    print(f"ratio   api growth / worker growth: {ratio:.3f}", flush=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--database-url", help="a PostgreSQL server URL on which to CREATE a fresh database")
    p.add_argument("--agents", type=int, default=20)
    p.add_argument("--items", type=int, default=20_000)
    p.add_argument("--threads", type=int, default=4)
    args = p.parse_args(argv)
    print_header("memory of an API process as evidence grows (roles)")
    env = {
        "TRUSTSCORE_ADDRESS_RATE_PER_MINUTE": "0",
        "TRUSTSCORE_KEY_RATE": "0",
        "TRUSTSCORE_PROJECT_INTERVAL": "0.05",
    }
    with tempfile.TemporaryDirectory(prefix="trustscore-bench-") as tmp:
        data = Path(tmp) / "data"
        dsn = (
            asyncio.run(fresh_database(args.database_url, "bench_roles_memory"))
            if args.database_url
            else embedded_dsn(data)
        )
        try:
            worker = ServeProcess(
                data, dsn, env={**env, "TRUSTSCORE_ROLE": "worker"}, log_path=Path(tmp) / "worker.log"
            ).start()
            try:
                api = ServeProcess(
                    data, dsn, env={**env, "TRUSTSCORE_ROLE": "api"}, log_path=Path(tmp) / "api.log"
                ).start()
                try:
                    run(api, worker, dsn, args)
                finally:
                    api.stop()
            finally:
                worker.stop()
        finally:
            if args.database_url:
                asyncio.run(drop_database(args.database_url, dsn))
    print(json.dumps({"done": True}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
