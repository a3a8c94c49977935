"""Shared pieces of the benchmarks: a fresh database, signed cards, the header of their output.

A real ``trustscore serve`` process is :class:`trustscore.devserver.ServeProcess`, shared with the demo and
the tests. Benchmarks are run by hand for figures (see bench/README.md); the tests run each once at a tiny
size (``tests/integration/test_bench_smoke.py``) so that none breaks silently.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import platform
import secrets
import shlex
import socket
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar
from urllib.parse import urlsplit, urlunsplit

import asyncpg
import msgspec

from trustscore.canonical import b64encode
from trustscore.devserver import ServeProcess
from trustscore.kinds import cards
from trustscore.ledger import dsse, keys, statements
from trustscore.store import embedded
from trustscore.store.ratings import RatingRow

T = TypeVar("T")


def machine() -> str:
    """One line naming the machine the figures were measured on."""
    return (
        f"{platform.machine()} {platform.system()} {platform.release()}, "
        f"{os.cpu_count()} CPUs (usable: {len(os.sched_getaffinity(0))}), "
        f"Python {platform.python_version()}"
    )


def print_header(title: str) -> None:
    print(f"# {title}")
    print(f"command: {shlex.join([sys.executable, *sys.argv])}")
    print(f"machine: {machine()}")
    print(f"date:    {datetime.now(UTC).isoformat(timespec='seconds')}")
    print(flush=True)


def percentile(sorted_values: Sequence[float], p: float) -> float:
    """The ``p``-th percentile (0..100) of already-sorted values, nearest-rank."""
    if not sorted_values:
        raise ValueError("no values")
    k = max(0, min(len(sorted_values) - 1, round(p / 100 * len(sorted_values) + 0.5) - 1))
    return sorted_values[k]


# --- the event loop ---------------------------------------------------------------------------------

#: How often :func:`stalled`'s coroutine wakes (seconds).
TICK = 0.005


async def stalled(run: Awaitable[T], tick: Callable[[], None] = lambda: None) -> tuple[T, float, float]:
    """``run``'s result, the seconds it took and the longest time the event loop could not run meanwhile,
    seen by a coroutine that wakes every :data:`TICK` seconds and calls ``tick`` each time."""
    longest = 0.0
    done = False

    async def ticker() -> None:
        nonlocal longest
        last = time.perf_counter()
        while not done:
            await asyncio.sleep(TICK)
            now = time.perf_counter()
            longest, last = max(longest, now - last - TICK), now
            tick()

    task = asyncio.create_task(ticker())
    await asyncio.sleep(4 * TICK)  # the ticker is running before ``run`` starts
    start = time.perf_counter()
    result = await run
    took = time.perf_counter() - start
    done = True
    await task
    return result, took, max(0.0, longest)


# --- databases ---------------------------------------------------------------------------------------


def _with_database(dsn: str, name: str) -> str:
    parts = urlsplit(dsn)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


async def fresh_database(admin_dsn: str, prefix: str) -> str:
    """Create a new, empty database on the server of ``admin_dsn``; return its DSN."""
    name = f"{prefix}_{secrets.token_hex(4)}"
    conn = await asyncpg.connect(admin_dsn)
    try:
        await conn.execute(f"CREATE DATABASE {name}")
    finally:
        await conn.close()
    return _with_database(admin_dsn, name)


async def drop_database(admin_dsn: str, dsn: str) -> None:
    name = urlsplit(dsn).path.lstrip("/")
    conn = await asyncpg.connect(admin_dsn)
    try:
        await conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    finally:
        await conn.close()


def embedded_dsn(data_dir: Path) -> str:
    """Start (or re-attach to) the embedded PostgreSQL in ``data_dir/pg``; stopped when we exit."""
    return embedded.start(data_dir / "pg")


@contextlib.contextmanager
def fresh_server(
    database_url: str | None, prefix: str, data_dir: Path, env: dict[str, str], *, keep: bool = False
) -> Iterator[ServeProcess]:
    """A started ``trustscore serve`` (one uvicorn worker) on a fresh database: CREATEd on the server of
    ``database_url`` and dropped after (unless ``keep``), else the embedded PostgreSQL in ``data_dir/pg``,
    stopped after, before the caller's temporary directory goes."""
    dsn = asyncio.run(fresh_database(database_url, prefix)) if database_url else embedded_dsn(data_dir)
    try:
        with ServeProcess(data_dir, dsn, env=env, log_path=data_dir / "serve.log") as server:
            yield server
    finally:
        if database_url and not keep:
            asyncio.run(drop_database(database_url, dsn))
        elif not database_url:
            embedded.stop(data_dir / "pg", wait=30)


# --- signed statements -------------------------------------------------------------------------------

_ISSUED_AT = statements.format_time(datetime(2025, 1, 1, tzinfo=UTC))


def kept_database(data_dir: Path, database_url: str | None, prefix: str) -> str:
    """The database of a bench's ``data_dir``: the one a previous run there wrote to ``bench-dsn`` (its
    embedded server started again), else a fresh database on ``database_url``, else the embedded one."""
    data_dir.mkdir(parents=True, exist_ok=True)
    dsn_file = data_dir / "bench-dsn"
    if dsn_file.exists():
        dsn = dsn_file.read_text().strip()
        if not database_url:
            embedded_dsn(data_dir)  # make sure the embedded server runs again
    elif database_url:
        dsn = asyncio.run(fresh_database(database_url, prefix))
    else:
        dsn = embedded_dsn(data_dir)
    dsn_file.write_text(dsn + "\n")
    return dsn


def in_data_dir(data_dir: Path | None, run: Callable[[Path], None]) -> int:
    """Run ``run`` on ``data_dir`` (kept), or on a temporary directory removed afterwards."""
    if data_dir:
        run(data_dir.resolve())
    else:
        with tempfile.TemporaryDirectory(prefix="trustscore-bench-") as tmp:
            run(Path(tmp) / "data")
    return 0


def signed_cards(seed: int, count: int, *, per_signer: int = 1) -> Iterator[dsse.Envelope]:
    """``count`` distinct agent cards, each signed by its own agent; ``per_signer`` cards share a key.

    Deterministic in ``seed`` apart from nothing: keys come from seeds and nonces from a counter, so
    two calls with different ``seed`` never produce the same statement or nonce.
    """
    key: keys.SigningKey | None = None
    for i in range(count):
        if key is None or i % per_signer == 0:
            key = keys.SigningKey.from_seed(
                (seed.to_bytes(8, "big") + i.to_bytes(8, "big")).ljust(32, b"\x5a")
            )
            public = b64encode(key.public_key)
            subject = cards.card_subject(key.public_key)
        card = cards.AgentCard(
            nonce=f"bench-{seed:08x}-{i:012d}",
            issued_at=_ISSUED_AT,
            public_key=public,
            name=f"bench agent {seed}-{i}",
            endpoint="https://agent.example/api",
            capabilities=["negotiation", "code"],
        )
        payload = statements.make_statement(cards.AGENT_CARD, subject, card)
        yield dsse.sign(payload, [key])


def encoded_cards(args: tuple[int, int]) -> list[bytes]:
    """JSON bytes of ``signed_cards(seed, count)``: a picklable unit of work for a process pool."""
    seed, count = args
    enc = msgspec.json.Encoder()
    return [enc.encode(e) for e in signed_cards(seed, count)]


class LightClient:
    """Sequential GETs on one keep-alive HTTP/1.1 connection over a plain socket, for timing latency.

    httpx spends ~0.4 ms of client CPU per request (a quarter of a millisecond more than the server
    spends on ``/healthz``), which a sequential latency would count as the server's; this client spends
    tens of microseconds. It understands only what the bench needs: a ``Content-Length`` body.
    """

    def __init__(self, url: str, timeout: float = 60) -> None:
        parts = urlsplit(url)
        self.host = parts.hostname or "127.0.0.1"
        self.sock = socket.create_connection((self.host, parts.port or 80), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = bytearray()

    def __enter__(self) -> LightClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.sock.close()

    def _recv(self) -> None:
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            raise ConnectionError("the server closed the connection")
        self.buf += chunk

    def get(self, path: str) -> tuple[int, bytes]:
        """The status and body of ``GET path``."""
        self.sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {self.host}\r\n\r\n".encode())
        while (end := self.buf.find(b"\r\n\r\n")) < 0:
            self._recv()
        head = bytes(self.buf[:end]).decode("latin-1").split("\r\n")
        del self.buf[: end + 4]
        length = None
        for line in head[1:]:
            name, _, value = line.partition(":")
            if name.strip().lower() == "content-length":
                length = int(value)
        if length is None:
            raise ValueError(f"GET {path}: no Content-Length in the response ({head[0]})")
        while len(self.buf) < length:
            self._recv()
        body = bytes(self.buf[:length])
        del self.buf[:length]
        return int(head[0].split(" ", 2)[1]), body


class NoRatingTable:
    """A rating table that stores nothing: publishing costs the rows' encoding and bookkeeping, not
    PostgreSQL (bench/rating_refresh.py, bench/takeover.py)."""

    async def write(self, rows: Sequence[RatingRow], log_size: int) -> int:
        return 0


def numpy_setting(set_here: str | None) -> str:
    """numpy's version and CPU setting, ``set_here`` by :func:`trustscore.cli.numpy_cpu.configure` or not
    (``NPY_DISABLE_CPU_FEATURES=`` before the command keeps AVX-512 on, to compare)."""
    import numpy as np  # imported by the caller already, after configure

    from trustscore.cli.numpy_cpu import VARIABLE

    why = " (set here: AMD Zen 4's AVX-512 sort is slow)" if set_here else ""
    return f"numpy {np.__version__}: {VARIABLE}={os.environ.get(VARIABLE)!r}{why}"
