"""``trustscore exam run --server`` sits fresh instances on a real server process (dialogues played with
the server), ``exam check-sitting`` recomputes them from the log alone, and practice runs stay local."""

from __future__ import annotations

import re
from pathlib import Path

import httpx

from tests.integration.service.conftest import ServerProcess
from tests.integration.service.test_cli import assert_one_line_error, cli
from trustscore import resources

AGENT = f"python:{resources.path('examples', 'agents', 'scripted.py')}:good"


def test_sit_on_a_server_then_anyone_checks_the_sitting(server: ServerProcess, tmp_path: Path) -> None:
    key = tmp_path / "agent.key"
    assert cli("keygen", "--out", key).returncode == 0
    r = cli("agent", "register", "--key", key, "--name", "sitter", "--server", server.url)
    assert r.returncode == 0, r.stderr
    verifier = httpx.get(server.url + "/v1/log/key").text.strip()
    for exam in ("negotiation@1", "integrity@1"):
        r = cli("exam", "run", "--exam", exam, "--agent", AGENT, "--key", key, "--server", server.url)
        assert r.returncode == 0, r.stderr
        assert r.stderr == ""  # no progress bar when stderr is not a terminal
        sitting = int(re.search(r"sitting (\d+) reported", r.stdout).group(1))  # type: ignore[union-attr]
        r = cli(
            "exam",
            "check-sitting",
            "--server",
            server.url,
            "--verifier-key",
            verifier,
            "--sitting",
            str(sitting),
        )
        assert r.returncode == 0, r.stderr
        assert "grades equal the server's" in r.stdout and "proven against checkpoint" in r.stdout
    # Not a sitting / not closed: one-line errors.
    assert_one_line_error(
        cli("exam", "check-sitting", "--server", server.url, "--verifier-key", verifier, "--sitting", "0"),
        "no sitting",
    )
    assert_one_line_error(cli("exam", "run", "--agent", AGENT, "--key", key, "--server", server.url), "--all")


def test_practice_runs_locally_and_submits_nothing(tmp_path: Path) -> None:
    r = cli("exam", "run", "--exam", "reliability@1", "--agent", AGENT)
    assert r.returncode == 0, r.stderr
    assert "practice instance graded locally" in r.stdout and "rel-006" in r.stdout
