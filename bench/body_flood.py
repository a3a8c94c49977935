"""One client address floods ``POST /v1/log/entries`` with large bodies: what it costs the server.

Starts ``trustscore serve`` (one uvicorn worker) on a fresh database at the default allowances, then for
``--duration`` seconds one address POSTs ``--in-flight`` bodies at a time of ``--body-mib`` MiB of valid
JSON (an array of small integers: the most costly shape to parse per byte, refused after its parse as
more than a batch holds), never waiting out a ``Retry-After``, while another connection asks for
``/healthz`` every 0.1 s. It prints the answers' statuses, the server's CPU seconds per wall second (the
whole process: reading, parsing, answering) and the ``/healthz`` latency meanwhile, as percentiles. The
baseline is the same health probe, measured first with no flood.

    PYTHONPATH=src python bench/body_flood.py                   # embedded PostgreSQL, temporary dir
    PYTHONPATH=src python bench/body_flood.py --chunked         # bodies without a Content-Length
    PYTHONPATH=src python bench/body_flood.py --database-url postgresql://postgres@127.0.0.1:5432/test
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from collections import Counter
from collections.abc import AsyncIterator
from pathlib import Path

import httpx

from _common import fresh_server, percentile, print_header  # bench/ is on sys.path
from ingest import cpu_seconds


async def _probe(url: str, until: float) -> list[float]:
    """``/healthz`` latencies in ms, one every 0.1 s until ``until``."""
    took: list[float] = []
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        while time.monotonic() < until:
            start = time.perf_counter()
            (await client.get("/healthz")).raise_for_status()
            took.append((time.perf_counter() - start) * 1000)
            await asyncio.sleep(0.1)
    return sorted(took)


async def _pieces(body: bytes) -> AsyncIterator[bytes]:
    """``body`` in pieces of 64 KiB: httpx sends it chunked (no Content-Length)."""
    for start in range(0, len(body), 65536):
        yield body[start : start + 65536]


async def _flood(url: str, body: bytes, in_flight: int, until: float, chunked: bool) -> Counter[int]:
    statuses: Counter[int] = Counter()
    async with httpx.AsyncClient(base_url=url, timeout=120) as client:

        async def one() -> None:
            while time.monotonic() < until:
                content = _pieces(body) if chunked else body
                r = await client.post(
                    "/v1/log/entries", content=content, headers={"content-type": "application/json"}
                )
                statuses[r.status_code] += 1

        await asyncio.gather(*(one() for _ in range(in_flight)))
    return statuses


async def _flooded(
    url: str, body: bytes, in_flight: int, duration: float, chunked: bool
) -> tuple[Counter[int], list[float]]:
    until = time.monotonic() + duration
    statuses, probes = await asyncio.gather(_flood(url, body, in_flight, until, chunked), _probe(url, until))
    return statuses, probes


def _line(what: str, probes: list[float]) -> str:
    p50, p90 = percentile(probes, 50), percentile(probes, 90)
    return f"{what:<12} healthz p50 {p50:7.1f} ms  p90 {p90:7.1f} ms  max {probes[-1]:7.1f} ms  ({len(probes)} probes)"


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--database-url", help="a PostgreSQL server to CREATE a fresh database on (default embedded)"
    )
    p.add_argument("--duration", type=float, default=15.0, help="seconds of flood (default 15)")
    p.add_argument(
        "--in-flight", type=int, default=4, help="bodies in flight from the one address (default 4)"
    )
    p.add_argument(
        "--body-mib", type=int, default=16, help="MiB a body (default 16, the app's default limit)"
    )
    p.add_argument("--chunked", action="store_true", help="send each body chunked, without a Content-Length")
    args = p.parse_args()
    ints = (args.body_mib * 1024 * 1024 - 1) // 2  # the body is 2 * ints + 1 bytes: within the limit
    body = b"[" + b"0," * (ints - 1) + b"0]"
    print_header("one address flooding POST /v1/log/entries with large bodies")
    with (
        tempfile.TemporaryDirectory(prefix="trustscore-bench-") as tmp,
        fresh_server(args.database_url, "bench_flood", Path(tmp) / "data", {}) as server,
    ):
        assert server.proc is not None
        pid = server.proc.pid
        quiet = asyncio.run(_probe(server.url, time.monotonic() + 3))
        cpu, start = cpu_seconds(pid), time.monotonic()
        statuses, probes = asyncio.run(
            _flooded(server.url, body, args.in_flight, args.duration, args.chunked)
        )
        cpu, wall = cpu_seconds(pid) - cpu, time.monotonic() - start
    print(_line("no flood", quiet))
    print(_line("flood", probes))
    framed = "chunked" if args.chunked else "declared"
    print(
        f"flood: {len(body) / 2**20:.0f} MiB bodies ({framed}), {args.in_flight} in flight, {wall:.1f} s: "
        f"answers {dict(statuses)}"
    )
    print(
        f"server CPU {cpu:.1f} s = {cpu / wall:.2f} cores; healthz p50 {percentile(probes, 50) / percentile(quiet, 50):.0f}x the quiet one"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
