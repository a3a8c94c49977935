"""``trustscore demo`` as a newcomer runs it: the whole product in one command, proofs verified,
re-verification catching the agent whose endpoint answers differently, an attestation verified offline
and a tampered one refused, and neither the embedded PostgreSQL nor an example agent server left running
afterwards."""

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


def stopped(pid: int, wait_s: float = 10) -> bool:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
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

    # One example agent server per persona, each card declaring it; the bluffer's answers as careless.
    served = out.split("== example agents served over HTTP", 1)[1].split("==", 2)[1]
    agents = re.findall(r"^\s+(\S+)\s+(http://127\.0\.0\.1:\d+/agent)\s+(\S+)\s+(\d+)$", served, re.MULTILINE)
    assert {name: answers for name, _, answers, _ in agents} == {
        "good": "good",
        "careless": "careless",
        "gullible": "gullible",
        "bluffer": "careless",
    }, served

    # Re-verification: good's endpoint matches its reports, the bluffer's does not.
    reverify = out.split("== re-verification", 1)[1].split("==", 2)[1]
    status = {
        m[0]: m[1:]
        for m in re.findall(
            r"^\s+(\S+)\s+\S+\s+(yes|no)\s+(match|mismatch|unreachable)\s+(\d\.\d\d)\s+\d+/\d+$",
            reverify,
            re.MULTILINE,
        )
    }
    assert sorted(status) == ["bluffer", "careless", "good", "gullible"], reverify
    assert status["good"][:2] == ("yes", "match"), reverify
    assert status["bluffer"][:2] == ("no", "mismatch"), reverify

    # good's attestation, saved and verified offline; a tampered copy refused with the verifier's message.
    attest = out.split("== rating attestation", 1)[1].split("==", 2)[1]
    assert re.search(
        r"^\s+attestation verified: \d+ entries, checkpoint \d+, total \d+ recomputed", attest, re.MULTILINE
    )
    assert re.search(
        r"^\s+tampered copy \(total \d+ -> \d+\): verification failed: \S.*$", attest, re.MULTILINE
    ), attest
    assert (data_dir / "attestation-good.json").is_file()
    assert f"trustscore rating verify {data_dir / 'attestation-good.json'}" in attest

    assert data_dir.is_dir()  # a given --data-dir is kept
    assert postgres_stopped(data_dir / "pg"), "the embedded PostgreSQL is still running"
    assert len(agents) == 4 and all(stopped(int(pid)) for *_, pid in agents), (
        "an agent server is still running"
    )


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
