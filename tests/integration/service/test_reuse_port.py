"""Several API processes on one port (``serve --reuse-port``, docs/operations.md): each listens with
SO_REUSEPORT, the kernel hands each its share of the connections, and when one stops the others go on
serving. A process without the option still finds the port taken."""

from __future__ import annotations

import os
import socket
import time
from pathlib import Path

import httpx

from tests.integration.service.conftest import ServerProcess, stopping
from tests.integration.service.test_startup_failures import one_line_error, serve
from trustscore.devserver import free_port

API = {"TRUSTSCORE_ROLE": "api", "TRUSTSCORE_REUSE_PORT": "1"}
CONNECTIONS = 24


def established_on(pid: int, port: int) -> int:
    """How many TCP connections to local ``port`` the process ``pid`` holds (Linux /proc)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    count = 0
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local_port = int(fields[1].split(":")[1], 16)
        if local_port == port and fields[3] == "01" and fields[9] in inodes:  # 01: ESTABLISHED
            count += 1
    return count


def healthz_over(sock: socket.socket) -> bytes:
    sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    return sock.recv(4096)


def test_api_processes_share_one_port_and_go_on_when_one_stops(tmp_path: Path, dsn: str) -> None:
    port = free_port()
    with stopping(ServerProcess) as start:
        worker = start(tmp_path / "data", dsn, env={"TRUSTSCORE_ROLE": "worker"}, log_path=tmp_path / "w.log")
        worker.start()
        first, second = (
            start(tmp_path / "data", dsn, port=port, env=API, log_path=tmp_path / f"api{i}.log")
            for i in (1, 2)
        )
        first.start()
        second.start()  # ready as soon as the port answers, which the first does: see below
        deadline = time.monotonic() + 60
        while "Application startup complete" not in second.output():  # it serves the port too
            assert second.proc is not None and second.proc.poll() is None, second.output()
            assert time.monotonic() < deadline, second.output()
            time.sleep(0.05)

        # Without the option the port is taken, as before; the message says what to do.
        r = serve("--port", port, "--data-dir", tmp_path / "other", "--database-url", dsn)
        one_line_error(r, f"cannot listen on 127.0.0.1:{port}")
        assert "--reuse-port" in r.stderr

        held = [socket.create_connection(("127.0.0.1", port), timeout=60) for _ in range(CONNECTIONS)]
        try:
            assert all(healthz_over(s).startswith(b"HTTP/1.1 200") for s in held)
            assert first.proc is not None and second.proc is not None
            shares = [established_on(p.proc.pid, port) for p in (first, second) if p.proc is not None]
            assert sum(shares) == CONNECTIONS and min(shares) > 0, shares
        finally:
            for s in held:
                s.close()

        first.stop()
        for _ in range(CONNECTIONS):  # every new connection reaches the process still listening
            assert httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 200
