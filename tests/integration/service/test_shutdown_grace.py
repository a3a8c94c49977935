"""A stopping ``trustscore serve`` waits at most TRUSTSCORE_SHUTDOWN_GRACE for requests in flight.

uvicorn's graceful shutdown waited for every request to end, with no bound: a client trickling a body
(within the slow-body rule's first 30 s window, docs/service.md) kept a SIGTERMed process, and the job
leases it held, alive until the body clock closed the connection; a client that kept its body just
above the minimum rate, for up to ten minutes."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
from pathlib import Path

from trustscore.devserver import ServeProcess


def test_sigterm_ends_the_process_within_the_grace_despite_a_trickling_body(tmp_path: Path, dsn: str) -> None:
    with ServeProcess(tmp_path / "data", dsn, env={"TRUSTSCORE_SHUTDOWN_GRACE": "1"}) as server:
        assert server.proc is not None
        with socket.create_connection(("127.0.0.1", server.port)) as sock:
            head = b"POST /v1/log/entries HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n"
            sock.sendall(head + b"[")  # the rest never comes: the body clock would close it at 30 s
            time.sleep(0.5)
            server.proc.send_signal(signal.SIGTERM)
            try:
                code = server.proc.wait(timeout=15)  # well before the body clock's 30 s
            except subprocess.TimeoutExpired:
                raise AssertionError("the server was still waiting for the trickling body") from None
        assert code == 0
        assert "timeout graceful shutdown exceeded" in server.output()


def test_sigterm_on_the_embedded_database_logs_no_error(tmp_path: Path) -> None:
    """The process stops its embedded PostgreSQL as it exits, and the library's own exit-time stop then
    found no server and logged an ERROR ("Failed postgres command ... pg_ctl stop", "killing it instead")
    at every normal shutdown (review)."""
    with ServeProcess(tmp_path / "data", None) as server:
        assert server.proc is not None
        server.proc.send_signal(signal.SIGTERM)
        assert server.proc.wait(timeout=60) == 0
    errors = [line for line in server.output().splitlines() if '"level": "error"' in line]
    assert not errors, errors
