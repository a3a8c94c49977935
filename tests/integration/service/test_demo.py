"""``trustscore demo`` as a newcomer runs it: the whole product in one command, proofs verified, and no
embedded PostgreSQL left running afterwards."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
from pathlib import Path

from tests.integration.service.conftest import free_port

# Runs the real entry point with the demo command registered, whether or not main.py lists it yet.
ENTRY = """
import sys
import trustscore.cli.main as m
if "trustscore.cli.demo" not in m.COMMAND_MODULES:
    m.COMMAND_MODULES = (*m.COMMAND_MODULES, "trustscore.cli.demo")
sys.exit(m.main(sys.argv[1:]))
"""


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def postgres_stopped(pg_dir: Path, wait_s: float = 10) -> bool:
    pid_file = pg_dir / "postmaster.pid"
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            pid = int(pid_file.read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return True
        if not pid_alive(pid):
            return True
        time.sleep(0.2)
    return False


def test_demo_ranks_good_first_verifies_proofs_and_stops_postgres(tmp_path: Path) -> None:
    data_dir = tmp_path / "demo"
    env = {k: v for k, v in os.environ.items() if not k.startswith("TRUSTSCORE_")}
    r = subprocess.run(
        [sys.executable, "-c", ENTRY, "demo", "--data-dir", str(data_dir), "--port", str(free_port())],
        capture_output=True,
        text=True,
        timeout=280,
        env=env,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    assert "Traceback" not in r.stdout + r.stderr
    out = r.stdout

    board = out.split("== leaderboard", 1)[1].split("==", 2)[1]
    ranks = re.findall(r"^\s+(\d+)\s+(\S+)\s+(\d+)\s+(\S+)$", board, re.MULTILINE)
    assert [name for _, name, _, _ in ranks][:1] == ["good"], out
    assert sorted(name for _, name, _, _ in ranks) == ["bluffer", "careless", "good", "gullible"], board
    assert "unranked" in board

    # Every persona sat every public exam, the capability exam included.
    for persona in ("good", "careless", "gullible", "bluffer"):
        assert re.search(rf"^\s+{persona}\s+capability@\d+\s+\d+\s+\d\.\d{{3}}", out, re.MULTILINE), out

    proofs = out.split("== proofs", 1)[1]
    assert "signature verified" in proofs
    assert len(re.findall(r"^\s+entry \d+ .*verified$", proofs, re.MULTILINE)) == 2, proofs
    assert "log verifier key: trustscore.local/log+" in proofs
    assert "trustscore log verify --server" in out and "trustscore evidence export" in out
    assert "trustscore score --weights" in out

    assert data_dir.is_dir()  # a given --data-dir is kept
    assert postgres_stopped(data_dir / "pg"), "the embedded PostgreSQL is still running"


def test_demo_refuses_a_busy_port_in_one_line(tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen()
        port = s.getsockname()[1]
        r = subprocess.run(
            [sys.executable, "-c", ENTRY, "demo", "--data-dir", str(tmp_path / "d"), "--port", str(port)],
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert r.returncode == 1
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"trustscore: error: port {port} is not free"), r.stderr
