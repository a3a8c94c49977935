"""Inclusion-proof latency over real HTTP on a log of 1,000,000 entries (``--entries`` to change).

Fills a fresh database through the service layer (``LogStore.append`` of real ``CheckedEntry``s made
from real signed agent cards, 20,000 per transaction; filling over HTTP would take minutes), lets the
integrator build the tree (``LogService.integrate_once``), then starts ``trustscore serve`` on that
database and times sequential GET /v1/log/proof/inclusion requests for random indexes next to GET
/healthz of the same app, then the same proofs again (the server's tile cache now holds their tiles),
and verifies a sample of the proofs against the signed checkpoint. Then the
same proofs are computed from C2SP tlog-tiles (``/tile/...``, docs/tiles.md) by the tiles client, cold
(every tile fetched for every proof) and warm (full tiles cached by the client, as a mirror or CDN
would), checked equal to the API's.

    python bench/proofs.py                           # 1M entries, embedded PostgreSQL, temporary dir
    python bench/proofs.py --entries 20000           # a quick run
    python bench/proofs.py --data-dir /tmp/ts-1m     # keep the filled log; later runs reuse it
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import time
from collections.abc import Iterator
from concurrent.futures import Future, ProcessPoolExecutor
from pathlib import Path

import httpx
import msgspec

from _common import (  # run as a script: bench/ is on sys.path
    LightClient,
    drop_database,
    in_data_dir,
    kept_database,
    percentile,
    print_header,
    signed_cards,
)
from trustscore.canonical import b64decode
from trustscore.devserver import ServeProcess
from trustscore.ledger import checkpoint, merkle, note
from trustscore.ledger.submission import CheckedEntry, check, prepare
from trustscore.services import logkey
from trustscore.services.log import LogService
from trustscore.settings import Settings
from trustscore.store import db
from trustscore.store.log import LogStore
from trustscore.tiles_client import TileClient

CHUNK = 20_000
PER_SIGNER = 100  # cards per agent key: fewer keys to generate, every statement still distinct


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument(
        "--entries", type=int, default=1_000_000, help="log size to measure at (default 1,000,000)"
    )
    p.add_argument("--requests", type=int, default=2000, help="timed requests per route (default 2000)")
    p.add_argument("--verify", type=int, default=200, help="proofs to verify against the checkpoint")
    p.add_argument(
        "--database-url",
        help="a PostgreSQL server URL on which to CREATE a fresh database (default: embedded PostgreSQL)",
    )
    p.add_argument(
        "--data-dir",
        type=Path,
        help="keep the log (key, embedded database, dsn) here; a later run with it skips the fill",
    )
    return p.parse_args(argv)


# --- filling -----------------------------------------------------------------------------------------


def checked_chunk(job: tuple[int, int]) -> list[CheckedEntry]:
    """Sign ``count`` cards and run them through the service's own checks (in a worker process)."""
    seed, count = job
    enc = msgspec.json.Encoder()
    out = []
    for env in signed_cards(seed, count, per_signer=PER_SIGNER):
        out.append(check(prepare(msgspec.json.decode(enc.encode(env))), lambda _: None))
    return out


def chunks(total: int, start: int) -> Iterator[tuple[int, int]]:
    for i in range(start, total, CHUNK):
        yield (1_000_000 + i // CHUNK, min(CHUNK, total - i))


async def fill(dsn: str, data_dir: Path, total: int) -> None:
    """Append and integrate until the log holds ``total`` entries, printing progress."""
    settings = Settings(data_dir=data_dir)
    await db.migrate(dsn)
    pool = await db.create_pool(dsn, min_size=1, max_size=2)
    try:
        store = LogStore(pool)
        key = logkey.load_or_create(settings.log_key_file)
        await logkey.bind(store, settings.log_origin, key)
        service = LogService(store, key, settings.log_origin, max_batch=settings.max_batch)
        have = await store.sequenced_size()
        if have < total:
            print(f"filling {have:,} -> {total:,} entries ({CHUNK:,} per transaction) ...", flush=True)
            t0 = time.perf_counter()
            with ProcessPoolExecutor(max_workers=os.cpu_count()) as ex:
                pending: list[Future[list[CheckedEntry]]] = []
                jobs = chunks(total, have)
                for job in jobs:
                    pending.append(ex.submit(checked_chunk, job))
                    if len(pending) < 3:
                        continue
                    await store.append(pending.pop(0).result())
                for fut in pending:
                    await store.append(fut.result())
            print(f"  appended in {time.perf_counter() - t0:.1f} s (signing and verifying included)")
        t0 = time.perf_counter()
        steps = 0
        while await service.integrate_once(50_000) is not None:
            steps += 1
        if steps:
            print(f"  integrated in {steps} steps, {time.perf_counter() - t0:.1f} s", flush=True)
        cp = await store.latest_checkpoint()
        if cp is None or cp.size < total:
            raise RuntimeError(f"integration stopped short of {total} entries: {cp}")
    finally:
        await pool.close()


# --- measuring ---------------------------------------------------------------------------------------


def timed(client: LightClient, paths: list[str]) -> list[float]:
    """Milliseconds per request, sequential, on one keep-alive connection (a light client: the latency
    is the server's and the network's, not httpx's)."""
    out = []
    for path in paths:
        t0 = time.perf_counter()
        status, body = client.get(path)
        elapsed = (time.perf_counter() - t0) * 1000
        if status != 200:
            raise RuntimeError(f"GET {path}: {status} {body[:300]!r}")
        out.append(elapsed)
    return sorted(out)


def verify_sample(client: httpx.Client, cp: checkpoint.Checkpoint, indexes: list[int]) -> None:
    """Check inclusion proofs of ``indexes`` against ``cp`` using the leaves the log serves."""
    for i in indexes:
        leaf = b64decode(
            client.get("/v1/log/entries", params={"start": i, "end": i + 1}).json()["entries"][0]["leaf"]
        )
        body = client.get("/v1/log/proof/inclusion", params={"index": i, "size": cp.size}).json()
        proof = [b64decode(h) for h in body["proof"]]
        merkle.verify_inclusion(merkle.leaf_hash(leaf), i, cp.size, proof, cp.root)


def timed_tiles(tiles: TileClient, indexes: list[int], size: int) -> tuple[list[float], int]:
    """Milliseconds per inclusion proof computed from tiles, and the tiles fetched."""
    out = []
    before = tiles.fetched
    for i in indexes:
        t0 = time.perf_counter()
        tiles.inclusion_proof(i, size)
        out.append((time.perf_counter() - t0) * 1000)
    return sorted(out), tiles.fetched - before


def measure_tiles(
    server: ServeProcess, cp: checkpoint.Checkpoint, indexes: list[int]
) -> list[tuple[str, list[float], int]]:
    """Proof latency from tiles, cold and warm, after checking tile proofs equal the API's."""
    with (
        TileClient(server.url, cache_tiles=0) as cold,
        TileClient(server.url) as warm,
        httpx.Client(base_url=server.url, timeout=30) as api,
    ):
        for i in indexes[:20]:
            body = api.get("/v1/log/proof/inclusion", params={"index": i, "size": cp.size}).json()
            if [b64decode(h) for h in body["proof"]] != cold.inclusion_proof(i, cp.size):
                raise RuntimeError(f"the proof of {i} from tiles differs from the API's")
        timed_tiles(cold, indexes[:200], cp.size)  # warm up the connection and the server's tile cache
        timed_tiles(warm, indexes[:200], cp.size)
        cold_ms, cold_n = timed_tiles(cold, indexes, cp.size)
        warm_ms, warm_n = timed_tiles(warm, indexes, cp.size)
    return [
        ("proof from tiles, cold", cold_ms, cold_n),
        ("proof from tiles, warm client", warm_ms, warm_n),
    ]


def measure(server: ServeProcess, requests: int, n_verify: int) -> None:
    rng = random.Random(6962)
    with httpx.Client(base_url=server.url, timeout=30) as client, LightClient(server.url) as light:
        vkey = client.get("/v1/log/key").text.strip()
        cp = checkpoint.open_checkpoint(
            client.get("/v1/log/checkpoint").text, note.parse_verifier_key(vkey), None
        )
        size = cp.size
        proof_paths = [
            f"/v1/log/proof/inclusion?index={rng.randrange(size)}&size={size}" for _ in range(requests)
        ]
        health_paths = ["/healthz"] * requests
        timed(light, proof_paths[:200] + health_paths[:200])  # warm up connection, caches, plans
        # Alternate the two routes in blocks so both see the same machine conditions.
        proof_ms: list[float] = []
        health_ms: list[float] = []
        for b in range(0, requests, 100):
            health_ms += timed(light, health_paths[b : b + 100])
            proof_ms += timed(light, proof_paths[b : b + 100])
        proof_ms.sort()
        health_ms.sort()
        # The same proofs again: what a server whose tile cache already holds their tiles answers.
        again_ms: list[float] = []
        for b in range(0, requests, 100):
            again_ms += timed(light, proof_paths[b : b + 100])
        again_ms.sort()
        t0 = time.perf_counter()
        verify_sample(client, cp, [rng.randrange(size) for _ in range(n_verify)])
        verified = time.perf_counter() - t0
    tile_rows = measure_tiles(server, cp, [rng.randrange(size) for _ in range(requests)])
    print()
    print(f"log size {size:,} (signed checkpoint verified with {vkey})")
    print(f"{requests} sequential requests per route, one keep-alive connection, random indexes:")
    print(f"{'route':<34} {'p50 ms':>7} {'p90 ms':>7} {'p99 ms':>7} {'max ms':>7}")
    for name, ms in (
        ("GET /v1/log/proof/inclusion", proof_ms),
        ("  the same proofs again", again_ms),
        ("GET /healthz (baseline)", health_ms),
    ):
        print(
            f"{name:<34} {percentile(ms, 50):>7.2f} {percentile(ms, 90):>7.2f} "
            f"{percentile(ms, 99):>7.2f} {ms[-1]:>7.2f}"
        )
    for name, ms, fetched in tile_rows:
        print(
            f"{name:<34} {percentile(ms, 50):>7.2f} {percentile(ms, 90):>7.2f} "
            f"{percentile(ms, 99):>7.2f} {ms[-1]:>7.2f}   ({fetched / len(ms):.2f} tiles fetched per proof)"
        )
    print(f"proof p50 minus healthz p50: {percentile(proof_ms, 50) - percentile(health_ms, 50):.2f} ms")
    print(
        f"same proofs again p50 minus healthz p50: {percentile(again_ms, 50) - percentile(health_ms, 50):.2f} ms"
    )
    api_p50 = percentile(proof_ms, 50)
    for name, ms, _ in tile_rows:
        print(f"{name} p50 / API proof p50 = {percentile(ms, 50) / api_p50:.2f}x")
    print(
        f"verified {n_verify} inclusion proofs (leaf from /v1/log/entries) against the checkpoint root "
        f"in {verified:.1f} s: all valid"
    )


# --- main --------------------------------------------------------------------------------------------


def run(args: argparse.Namespace, data_dir: Path) -> None:
    dsn = kept_database(data_dir, args.database_url, "bench_proofs")
    print(f"database: {dsn}", flush=True)
    try:
        asyncio.run(fill(dsn, data_dir, args.entries))
        server = ServeProcess(data_dir, dsn, log_path=data_dir / "serve.log")
        print(f"server:   {' '.join(server.argv)}", flush=True)
        with server:
            measure(server, args.requests, args.verify)
    finally:
        if args.database_url and not args.data_dir:  # nothing would remember it: do not leave it behind
            asyncio.run(drop_database(args.database_url, dsn))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    print_header(f"trustscore bench: inclusion-proof latency at {args.entries:,} entries")
    return in_data_dir(args.data_dir, lambda data_dir: run(args, data_dir))


if __name__ == "__main__":
    sys.exit(main())
