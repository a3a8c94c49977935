"""Webhook delivery latency (cause to receipt) and throughput (events/s delivered) to a local receiver.

Starts ``trustscore serve`` on a fresh database with loopback targets allowed, registers a marketplace
and ``--agents`` agents, subscribes a local receiver (a ThreadingHTTPServer that verifies every ``v1a``
signature with the published key) to ``event.negative``, then:

- latency: posts ``--latency-events`` negative marketplace events one at a time and measures, per event,
  from the POST's 201 (the cause is in the log) to its receipt; prints p50/p90/p99;
- throughput: with the receiver answering 503, posts ``--events`` events spread over the agents (they
  wait in the outbox), then lets the receiver answer and times until every event is received: events/s;
- baseline, in the same run: the bare receiver's POST rate, the same signed bodies POSTed straight to it
  from as many threads as the dispatcher uses, and the ratio throughput/baseline.

    python bench/webhooks.py --database-url postgresql://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import msgspec

from _common import drop_database, embedded_dsn, fresh_database, percentile, print_header
from trustscore.cli.agent import card_envelope
from trustscore.devserver import ServeProcess
from trustscore.kinds.events import make_event
from trustscore.kinds.parties import make_party_card
from trustscore.kinds.subscriptions import make_subscription
from trustscore.ledger import dsse, keys
from trustscore.webhooks import signing

THREADS = min(32, (os.cpu_count() or 1) + 4)  # asyncio.to_thread's default pool: the dispatcher's senders


class Receiver:
    """Verifies each delivery, records the first receipt time of each id; 503 while ``down``."""

    def __init__(self) -> None:
        self.public_key = b""
        self.down = False
        self.received: dict[str, float] = {}
        self.lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                status = outer.handle(dict(self.headers.items()), body)
                self.send_response(status)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def handle(self, headers: dict[str, str], body: bytes) -> int:
        if self.down:
            return 503
        if not self.public_key:  # the baseline's bodies: verified with the same cost, no record
            return 204
        msg_id = signing.verify(self.public_key, headers, body, int(time.time()))
        with self.lock:
            self.received.setdefault(msg_id, time.perf_counter())
        return 204


def post(client: httpx.Client, url: str, env: object) -> int:
    r = client.post(url, content=msgspec.json.encode(env))
    if r.status_code != 201:
        raise RuntimeError(f"{url}: {r.status_code} {r.text}")
    out = r.json()
    return int(out["entries"][0]["index"] if "entries" in out else out["index"])


def event(market: keys.SigningKey, agent: str, n: int) -> dsse.Envelope:
    payload = make_event(
        marketplace=market.id,
        agent=agent,
        event="delivery_failed",
        ref=f"o{n}",
        occurred_at="2026-11-29T00:00:00Z",
    )
    return dsse.sign(payload, [market])


def baseline(receiver: Receiver, n: int) -> float:
    """POSTs/s of signed bodies straight to the receiver from THREADS threads (one client each)."""
    key = keys.SigningKey.generate()
    receiver.public_key = b""
    body = (
        b'{"data":{"agent":"ts1_x","id":"evt_x"},"timestamp":"2026-11-29T00:00:00Z","type":"event.negative"}'
    )
    local = threading.local()

    def one(i: int) -> None:
        if not hasattr(local, "c"):
            local.c = httpx.Client()
        hdrs = signing.headers(key, f"evt_{i}", int(time.time()), body)
        signing.verify(key.public_key, hdrs, body, int(time.time()))  # the receiver's cost, done here
        r = local.c.post(receiver.url, content=body, headers={**hdrs, "content-type": "application/json"})
        assert r.status_code == 204

    started = time.perf_counter()
    with ThreadPoolExecutor(THREADS) as pool:
        list(pool.map(one, range(n)))
    return n / (time.perf_counter() - started)


def run(server: ServeProcess, receiver: Receiver, args: argparse.Namespace) -> None:
    with httpx.Client(base_url=server.url, timeout=60) as c:
        market = keys.SigningKey.generate()
        post(
            c,
            "/v1/log/entries",
            dsse.sign(make_party_card(market.public_key, "market", "marketplace"), [market]),
        )
        agents = []
        for i in range(args.agents):
            k = keys.SigningKey.generate()
            post(c, "/v1/log/entries", card_envelope(k, f"agent {i}"))
            agents.append(k.id)
        receiver.public_key = signing.parse_public_key(c.get("/v1/webhooks/key").json()["public_key"])
        sub = make_subscription(subscriber=market.id, url=receiver.url, events=["event.negative"])
        post(c, "/v1/subscriptions", dsse.sign(sub, [market]))
        envs = [event(market, agents[i % len(agents)], i) for i in range(args.latency_events + args.events)]

        # latency: one event at a time, from the 201 to the receipt
        waits = []
        for env in envs[: args.latency_events]:
            before = len(receiver.received)
            post(c, "/v1/events", env)
            acked = time.perf_counter()
            while len(receiver.received) == before:
                time.sleep(0.0005)
            waits.append((max(receiver.received.values()) - acked) * 1000)
        waits.sort()
        print(
            f"latency   {len(waits)} events, one at a time: p50 {percentile(waits, 50):.0f} ms, "
            f"p90 {percentile(waits, 90):.0f} ms, p99 {percentile(waits, 99):.0f} ms (cause logged -> received)"
        )

        # throughput: events wait in the outbox while the receiver answers 503, then drain
        receiver.down = True
        for env in envs[args.latency_events :]:
            post(c, "/v1/events", env)
        print(f"(posted {args.events} events while the receiver answers 503)", flush=True)
        time.sleep(2.0)  # every event derived; heads retried at least once
        done = len(receiver.received)
        receiver.down = False
        started = time.perf_counter()
        while len(receiver.received) < done + args.events:
            if time.perf_counter() - started > 600:
                raise RuntimeError(
                    f"only {len(receiver.received) - done} of {args.events} delivered in 600 s"
                )
            time.sleep(0.01)
        seconds = time.perf_counter() - started
        rate = args.events / seconds
        print(
            f"throughput {args.events} events over {args.agents} agents: {seconds:.2f} s, {rate:.0f} events/s delivered"
        )
    base = baseline(receiver, args.baseline_posts)
    print(f"baseline  bare receiver, {THREADS} threads POSTing signed bodies: {base:.0f} POSTs/s")
    print(f"ratio     delivered / bare receiver: {rate / base:.3f}")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--database-url", help="a PostgreSQL server URL on which to CREATE a fresh database")
    p.add_argument("--agents", type=int, default=50)
    p.add_argument("--events", type=int, default=2000)
    p.add_argument("--latency-events", type=int, default=200)
    p.add_argument("--baseline-posts", type=int, default=2000)
    args = p.parse_args(argv)
    print_header("webhook delivery latency and throughput")
    env = {
        "TRUSTSCORE_OUTBOUND_ALLOW_LOOPBACK": "true",
        "TRUSTSCORE_ADDRESS_RATE_PER_MINUTE": str(10**9),
        "TRUSTSCORE_KEY_RATE": "0",
        "TRUSTSCORE_WEBHOOK_RATE": "0",
        "TRUSTSCORE_WEBHOOK_INTERVAL": "0.05",
        "TRUSTSCORE_PROJECT_INTERVAL": "0.05",
        "TRUSTSCORE_WEBHOOK_BACKOFF_BASE": "0.2",
        "TRUSTSCORE_WEBHOOK_BACKOFF_CAP": "0.4",
        "TRUSTSCORE_WEBHOOK_MAX_ATTEMPTS": "100",
    }
    receiver = Receiver()
    with tempfile.TemporaryDirectory(prefix="trustscore-bench-") as tmp:
        data = Path(tmp) / "data"
        dsn = (
            asyncio.run(fresh_database(args.database_url, "bench_webhooks"))
            if args.database_url
            else embedded_dsn(data)
        )
        try:
            server = ServeProcess(data, dsn, env=env).start()  # its log goes to a file beside data/
            try:
                run(server, receiver, args)
            finally:
                server.stop()
        finally:
            if args.database_url:
                asyncio.run(drop_database(args.database_url, dsn))
    receiver.server.shutdown()
    print(json.dumps({"done": True}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
