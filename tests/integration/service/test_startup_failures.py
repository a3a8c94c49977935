"""``trustscore serve`` start-up failures: one line saying what and what to do, non-zero exit, nothing
created; and whoever serves a data directory stops its embedded PostgreSQL when it stops."""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg

from tests.integration.service.conftest import ServerProcess, free_port


def serve(*args: str | int | Path, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trustscore.cli.main", "serve", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def one_line_error(r: subprocess.CompletedProcess[str], words: str) -> None:
    assert r.returncode != 0, r.stdout
    assert "Traceback" not in r.stderr + r.stdout
    assert "listening" not in r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("trustscore: error:"), r.stderr
    assert words in lines[0], r.stderr


def test_a_taken_port_fails_first_and_creates_nothing(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        r = serve("--port", port, "--data-dir", tmp_path / "data")
    one_line_error(r, f"cannot listen on 127.0.0.1:{port}")
    assert "--port" in r.stderr
    assert not (tmp_path / "data").exists()


def test_an_out_of_range_port_is_refused(tmp_path: Path) -> None:
    one_line_error(serve("--port", "99999", "--data-dir", tmp_path / "data"), "expected int <= 65535")
    assert not (tmp_path / "data").exists()


def test_a_shared_port_is_for_api_processes_only(tmp_path: Path) -> None:
    """A worker (which serves no API) or an ``all`` process (which, without the ratings lease, serves the
    ratings of its start) would answer its share of a shared port wrongly; two ``all`` processes would
    also share one data directory's embedded PostgreSQL, which the first to exit stops."""
    for role in ("all", "worker"):
        r = serve("--port", free_port(), "--data-dir", tmp_path / "data", "--role", role, "--reuse-port")
        one_line_error(r, "--reuse-port is for --role api processes only")
        assert not (tmp_path / "data").exists()
    r = serve("--port", free_port(), "--data-dir", tmp_path / "data", "--role", "api", "--reuse-port")
    one_line_error(r, "--role api needs an external PostgreSQL shared by every process")


def test_a_role_without_an_external_database_is_refused(tmp_path: Path) -> None:
    r = serve("--port", free_port(), "--data-dir", tmp_path / "data", "--role", "worker")
    one_line_error(r, "--role worker needs an external PostgreSQL shared by every process")
    assert not (tmp_path / "data").exists()


def test_an_unreachable_database_fails_with_one_line_and_creates_nothing(tmp_path: Path) -> None:
    closed = free_port()
    url = f"postgresql://postgres@127.0.0.1:{closed}/nothing"
    r = serve("--port", free_port(), "--data-dir", tmp_path / "data", "--database-url", url)
    one_line_error(r, "cannot connect to PostgreSQL")
    assert "--database-url" in r.stderr
    assert not (tmp_path / "data").exists()


def test_fsck_of_a_missing_data_dir_creates_nothing(tmp_path: Path) -> None:
    r = subprocess.run(
        [sys.executable, "-m", "trustscore.cli.main", "log", "fsck", "--data-dir", str(tmp_path / "none")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    one_line_error(r, "holds no embedded database")
    assert not (tmp_path / "none").exists()


def _postmaster(pg_dir: Path) -> int | None:
    try:
        pid = int((pg_dir / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return None
    return pid if Path(f"/proc/{pid}").exists() else None


def test_serve_after_kill9_stops_the_reattached_database_on_sigterm(tmp_path: Path) -> None:
    pg = tmp_path / "data" / "pg"
    first = ServerProcess(tmp_path / "data", None)
    first.start()
    first.kill9()
    left = _postmaster(pg)
    assert left is not None, "the embedded PostgreSQL should survive kill -9 of its server"
    second = ServerProcess(tmp_path / "data", None, port=free_port())
    try:
        second.start()
        assert _postmaster(pg) == left  # re-attached, not a second cluster
    finally:
        assert second.proc is not None
        second.proc.send_signal(signal.SIGTERM)
        assert second.proc.wait(60) == 0
    deadline = time.monotonic() + 30
    while _postmaster(pg) is not None and time.monotonic() < deadline:
        time.sleep(0.1)
    if _postmaster(pg) is not None:
        os.kill(left, signal.SIGKILL)
        raise AssertionError("the embedded PostgreSQL kept running after its server stopped")


def test_serve_with_another_log_key_fails_with_one_line(tmp_path: Path, dsn: str) -> None:
    """A database whose log another key signs: one line naming both keys, a non-zero exit, no traceback
    (it used to be the lifespan's start-up traceback), and no key file made where none was."""
    first = ServerProcess(tmp_path / "first", dsn)
    first.start()
    first.stop()
    other = tmp_path / "other"
    other.mkdir()
    r = serve("--port", free_port(), "--data-dir", other, "--database-url", dsn)
    one_line_error(r, "this database's log is signed by")
    assert "there is no log key" in r.stderr
    assert not (other / "log.key").exists()
    shutil.copy(first.data_dir / "service.key", other / "log.key")  # a key, but not the log's
    r = serve("--port", free_port(), "--data-dir", other, "--database-url", dsn)
    one_line_error(r, "but the configured log key is")
    shutil.copy(first.data_dir / "log.key", other / "log.key")  # the original key serves again
    again = ServerProcess(other, dsn)
    again.start()
    again.stop()


def serve_reading(tmp_path: Path, dsn: str, read_url: str) -> subprocess.CompletedProcess[str]:
    """``serve`` on ``dsn`` with a fresh data directory, reading from ``read_url``."""
    data = tmp_path / "data"
    return serve(
        "--port", free_port(), "--data-dir", data, "--database-url", dsn, "--read-database-url", read_url
    )


def test_an_unreachable_read_database_fails_with_one_line_and_creates_nothing(
    tmp_path: Path, dsn: str
) -> None:
    r = serve_reading(tmp_path, dsn, f"postgresql://postgres@127.0.0.1:{free_port()}/nothing")
    one_line_error(r, "cannot connect to PostgreSQL")
    assert "--read-database-url" in r.stderr
    assert not (tmp_path / "data").exists()


async def test_a_read_database_holding_another_log_is_refused_with_one_line(
    tmp_path: Path, dsn: str, admin_dsn: str
) -> None:
    """A read URL naming another trustscore database (not a replica of this one) would serve another log's
    checkpoints and proofs: refused before the service starts."""
    conn = await asyncpg.connect(admin_dsn)
    other_db = "ts_test_" + secrets.token_hex(6)
    try:
        await conn.execute(f"CREATE DATABASE {other_db}")
        other = urlunsplit(urlsplit(dsn)._replace(path="/" + other_db))
        elsewhere = ServerProcess(tmp_path / "elsewhere", other)
        await asyncio.to_thread(elsewhere.start)
        elsewhere.stop()
        r = await asyncio.to_thread(serve_reading, tmp_path, dsn, other)
        one_line_error(r, "--read-database-url must name a replica of --database-url")
        assert elsewhere.verifier_key() in r.stderr
    finally:
        await conn.execute(f"DROP DATABASE IF EXISTS {other_db} WITH (FORCE)")
        await conn.close()
