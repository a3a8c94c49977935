"""Throwaway PostgreSQL clusters for tests that need more than one database server: a primary made with
``initdb`` and streaming replicas made from it with ``pg_basebackup``, all from one set of binaries.

The binaries are Debian's (``/usr/lib/postgresql/<major>/bin``) or those under ``TRUSTSCORE_TEST_PG_BIN``;
:func:`pg_bin` is None when none are installed (tests then skip, saying so). PostgreSQL refuses to run as
root, so as root every command runs as the ``postgres`` user (``runuser``) on directories it owns, under a
fresh directory in the system temporary directory (pytest's ``tmp_path`` is private to root). Servers
listen on 127.0.0.1 at free ports, trust local connections (test clusters only) and allow replication.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import asyncpg

from trustscore.devserver import free_port

TOOLS = ("initdb", "pg_ctl", "pg_basebackup", "postgres")
RUN_AS = "postgres"  # the account the servers run as when we are root


def pg_bin() -> Path | None:
    """The directory holding every tool in :data:`TOOLS`, or None."""
    given = os.environ.get("TRUSTSCORE_TEST_PG_BIN")
    candidates = [Path(given)] if given else sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True)
    for d in candidates:
        if all((d / t).is_file() for t in TOOLS):
            return d
    return None


def _as_server_user(argv: list[str]) -> list[str]:
    return ["runuser", "-u", RUN_AS, "--", *argv] if os.geteuid() == 0 else argv


def _run(argv: list[str]) -> None:
    done = subprocess.run(_as_server_user(argv), capture_output=True, text=True, timeout=120, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"{Path(argv[0]).name} failed ({done.returncode}): {done.stderr.strip()[-2000:]}")


@dataclass
class Cluster:
    """One PostgreSQL server on a data directory, listening on 127.0.0.1:``port``."""

    bin: Path
    data: Path
    port: int

    def dsn(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def start(self) -> Cluster:
        options = f"-p {self.port} -c listen_addresses=127.0.0.1 -c unix_socket_directories={self.data}"
        log = self.data.parent / f"{self.data.name}.log"
        _run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-l", str(log), "-o", options, "-w", "start"])
        return self

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            _run([str(self.bin / "pg_ctl"), "-D", str(self.data), "-m", "immediate", "-w", "stop"])

    async def fetchval(self, sql: str, database: str = "postgres") -> object:
        conn = await asyncpg.connect(self.dsn(database))
        try:
            return await conn.fetchval(sql)
        finally:
            await conn.close()


@dataclass
class Replicated:
    """A primary and one streaming replica of it."""

    primary: Cluster
    replica: Cluster

    async def caught_up(self, within: float = 60.0) -> None:
        """Wait until the replica is in recovery and has replayed everything the primary has written."""
        target = await self.primary.fetchval("SELECT pg_current_wal_lsn()::text")
        deadline = time.monotonic() + within
        while True:
            replayed = await self.replica.fetchval(
                f"SELECT pg_is_in_recovery() AND pg_last_wal_replay_lsn() >= '{target}'::pg_lsn"
            )
            if replayed:
                return
            if time.monotonic() > deadline:
                raise TimeoutError(f"the replica has not replayed the primary's WAL up to {target}")
            await asyncio.sleep(0.05)


def _server_dir() -> Path:
    base = Path(tempfile.mkdtemp(prefix="trustscore-pg-"))
    if os.geteuid() == 0:
        account = pwd.getpwnam(RUN_AS)
        os.chown(base, account.pw_uid, account.pw_gid)
    return base


def init_primary(bin_dir: Path, base: Path) -> Cluster:
    """A new cluster in ``base``/primary, configured to stream WAL to replicas, started."""
    data = base / "primary"
    _run([str(bin_dir / "initdb"), "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8"])
    with (data / "postgresql.conf").open("a") as conf:
        conf.write("wal_level = replica\nmax_wal_senders = 4\nhot_standby = on\nfsync = off\n")
    with (data / "pg_hba.conf").open("a") as hba:
        hba.write("host replication postgres 127.0.0.1/32 trust\n")
    return Cluster(bin_dir, data, free_port()).start()


def base_backup(primary: Cluster, base: Path, name: str = "replica") -> Cluster:
    """A streaming replica of ``primary`` (``pg_basebackup -R``: it follows the primary), started."""
    data = base / name
    _run(
        [
            str(primary.bin / "pg_basebackup"),
            *("-h", "127.0.0.1", "-p", str(primary.port), "-U", "postgres"),
            *("-D", str(data), "-R", "-X", "stream", "-c", "fast"),
        ]
    )
    return Cluster(primary.bin, data, free_port()).start()


@contextlib.contextmanager
def replicated() -> Iterator[Replicated]:
    """A started primary and a streaming replica of it, both stopped and removed afterwards."""
    bin_dir = pg_bin()
    if bin_dir is None:
        raise RuntimeError("no PostgreSQL binaries (initdb, pg_ctl, pg_basebackup, postgres)")
    base = _server_dir()
    started: list[Cluster] = []
    try:
        started.append(init_primary(bin_dir, base))
        started.append(base_backup(started[0], base))
        yield Replicated(started[0], started[1])
    finally:
        for cluster in reversed(started):
            cluster.stop()
        shutil.rmtree(base, ignore_errors=True)
