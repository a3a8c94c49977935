"""Every command README.md shows a user runs, in order, against a fresh server, and succeeds.

The commands are read from the README itself (its indented blocks after "Using it"), so the front door
cannot drift from what works. Only the server address is rewritten (the test server's port), and the
``.venv/bin`` the commands name is this interpreter's.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from tests.integration.service.conftest import ServerProcess
from trustscore import resources

README = Path(__file__).resolve().parents[3] / "README.md"


def readme_commands(text: str) -> list[str]:
    """The shell commands of the indented blocks from "## Using it" to "## Configuration", in order."""
    section = text.split("## Using it", 1)[1].split("## Configuration", 1)[0]
    commands: list[str] = []
    current = ""
    for line in section.splitlines():
        if not line.startswith("    "):
            continue
        current += re.sub(r"\s{2,}# .*$", "", line.strip())  # a trailing comment after two spaces
        if current.endswith("\\"):
            current = current[:-1] + " "
            continue
        commands.append(current)
        current = ""
    return commands


def test_readme_lists_the_commands_this_test_runs() -> None:
    commands = readme_commands(README.read_text())
    joined = "\n".join(commands)
    for step in ("keygen", "agent register", "exam run", "exam submit", "log verify", "log fsck"):
        assert f"trustscore {step}" in joined
    assert "evidence export" in joined and "rating verify" in joined
    assert "trustscore rating show" in joined and "trustscore leaderboard" in joined
    assert "trustscore onboard" in joined
    assert len(commands) >= 12


def test_every_readme_command_runs_against_a_fresh_server(server: ServerProcess, tmp_path: Path) -> None:
    work = tmp_path / "user"
    (work / ".venv").mkdir(parents=True)
    (work / ".venv" / "bin").symlink_to(Path(sys.executable).parent)
    for folder in ("examples", "weights"):
        (work / folder).symlink_to(resources.ROOT / folder)
    commands = [c.replace("http://127.0.0.1:8080", server.url) for c in readme_commands(README.read_text())]
    script = "set -euo pipefail\n" + "\n".join(f"echo '+++ {i}'\n{c}" for i, c in enumerate(commands))
    r = subprocess.run(
        ["bash", "-c", script],
        cwd=work,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    assert r.returncode == 0, f"README command failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    assert "Traceback" not in r.stderr
    out = r.stdout
    assert "entry 1:" in out and "signatures verified" in out
    assert re.search(r"fsck: \d+ entries, checkpoint size \d+: clean", out)
    assert "evidence items:" in out
    assert "DIMENSION" in out and "MEDAL" in out and "leaderboard of trustscore-v2 by total" in out
    assert f"profile: {server.url}/agents/ts1_" in out and "/badge.svg)" in out
    assert (work / "e.jsonl").stat().st_size > 0 and (work / "bundle.json").stat().st_size > 0
