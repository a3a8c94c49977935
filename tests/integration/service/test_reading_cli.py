"""The reading and onboarding commands against a real server: onboard, rating show, leaderboard, agent
show|list, settle, each through the real command line (a subprocess) with ``--json`` and as text."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.integration.service.conftest import ServerProcess
from trustscore.cli.main import main

GOOD = "python:examples/agents/scripted.py:good"


def cli(
    *args: str | Path, env: dict[str, str] | None = None, ok: bool = True
) -> subprocess.CompletedProcess[str]:
    r = subprocess.run(
        [sys.executable, "-m", "trustscore.cli.main", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, **(env or {})},
    )
    if ok:
        assert r.returncode == 0, r.stderr
    return r


def test_onboard_then_read_everything(server: ServerProcess, tmp_path: Path) -> None:
    key = tmp_path / "new" / "agent.key"
    key.parent.mkdir()
    out = json.loads(
        cli("onboard", "--agent", GOOD, "--name", "onboarded", "--key", key, "--server", server.url,
            "--exam", "capability@1", "--exam", "integrity@1", "--json").stdout
    )  # fmt: skip
    agent = out["agent"]
    assert key.exists() and out["key_created"]
    assert [s["exam"] for s in out["sittings"]] == ["capability@1", "integrity@1"]
    assert out["rating"]["agent"] == agent and out["rating"]["total"] is not None
    assert out["profile"] == f"{server.url}/agents/{agent}"
    assert (
        out["badge_markdown"]
        == f"[![trustscore]({server.url}/v1/agents/{agent}/badge.svg)]({out['profile']})"
    )
    # Every medal entry names why it is missing or what it is; one exam sitting is fresh and real (verified).
    medals = out["rating"]["medals"]["dimensions"]
    assert set(medals) == set(out["rating"]["dimensions"])
    assert all((m["medal"] is None) == (m["reason"] is not None) for m in medals.values())
    assert medals["capability"]["real_n"] >= 3 and medals["capability"]["freshness"] > 0.99

    # Onboarding again reuses the key (never overwritten).
    again = cli("onboard", "--agent", GOOD, "--name", "onboarded", "--key", key, "--server", server.url,
                "--exam", "capability@1")  # fmt: skip
    assert f"read from {key}" in again.stderr and f"profile: {server.url}/agents/{agent}" in again.stdout

    # rating show, from the environment's server (TRUSTSCORE_SERVER) instead of --server.
    env = {"TRUSTSCORE_SERVER": server.url}
    shown = json.loads(cli("rating", "show", agent, "--json", env=env).stdout)
    assert (
        shown["agent"] == agent
        and shown["medals"]
        == json.loads(cli("rating", "show", agent, "--json", "--server", server.url).stdout)["medals"]
    )
    text = cli("rating", "show", agent, env=env).stdout
    assert f"agent {agent} under trustscore-v2" in text and "DIMENSION" in text and "MEDAL" in text
    baseline = json.loads(cli("rating", "show", agent, "--model", "baseline-v0.3", "--json", env=env).stdout)
    assert baseline["model_version"] == "baseline-v0.3" and baseline["medals"] is None

    board = json.loads(cli("leaderboard", "--json", "--limit", "5", env=env).stdout)
    assert board["ranked"][0]["agent"] == agent
    assert board["ranked"][0]["medals"] == {d: m["medal"] for d, m in medals.items() if m["medal"]}
    text = cli("leaderboard", "--dimension", "capability", env=env).stdout
    # The log size the board holds for (a board made while the log moved may lag, and says so).
    assert agent in text and re.search(r"by capability, as of log size \d+\n", text)

    card = json.loads(cli("agent", "show", agent, "--json", env=env).stdout)
    assert card["id"] == agent and card["name"] == "onboarded"
    assert "name: onboarded" in cli("agent", "show", agent, env=env).stdout

    # A counterparty registers and reports a deal about the agent.
    buyer = tmp_path / "buyer.key"
    cli("keygen", "--out", buyer)
    cli("agent", "register", "--key", buyer, "--name", "buyer", env=env)
    settled = json.loads(
        cli(
            "settle", agent, "--key", buyer, "--role", "buyer", "--delivery", "pass", "--json", env=env
        ).stdout
    )
    assert settled["about"] == agent and isinstance(settled["index"], int)

    listed = json.loads(cli("agent", "list", "--json", env=env).stdout)
    ids = [a["id"] for a in listed["agents"]]
    assert agent in ids and ids == sorted(ids) and listed["next"] is None
    first = json.loads(cli("agent", "list", "--limit", "1", "--json", env=env).stdout)
    assert first["agents"][0]["id"] == ids[0] and first["next"] == ids[0]
    rest = json.loads(cli("agent", "list", "--after", first["next"], "--json", env=env).stdout)
    assert [a["id"] for a in rest["agents"]] == ids[1:]


def test_mistakes_are_one_line(server: ServerProcess, tmp_path: Path) -> None:
    unknown = "ts1_" + "0" * 40
    r = cli("rating", "show", unknown, "--server", server.url, ok=False)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "trustscore: error:" in r.stderr
    r = cli("agent", "show", "../log/key", "--server", server.url, ok=False)
    assert r.returncode == 1 and "is not an agent id" in r.stderr
    # A settlement about oneself is refused locally, before it is sent.
    key = tmp_path / "k.key"
    made = json.loads(cli("keygen", "--out", key, "--json").stdout)
    deliver = ("--key", key, "--role", "buyer", "--delivery", "pass", "--server", server.url)
    r = cli("settle", made["id"], *deliver, ok=False)
    assert r.returncode == 1 and "self-dealing" in r.stderr and "Traceback" not in r.stderr
    # A reporter the log does not know is refused by the server (4xx: exit 1, one line).
    r = cli("settle", unknown, *deliver, ok=False)
    assert r.returncode == 1 and r.stderr.count("\n") == 1, r.stderr


def test_each_command_in_process(
    server: ServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The happy path of each command through ``main([...])`` (no interpreter start per command), with the
    server from TRUSTSCORE_SERVER."""
    monkeypatch.setenv("TRUSTSCORE_SERVER", server.url)

    def run(*argv: str) -> Any:
        assert main([*argv, "--json"]) == 0
        return json.loads(capsys.readouterr().out)

    key = tmp_path / "a.key"
    out = run("onboard", "--agent", GOOD, "--name", "inproc", "--key", str(key), "--exam", "delivery@1")
    agent = out["agent"]
    assert out["rating"]["dimensions"]["delivery"]["n"] > 0
    assert (
        run("rating", "show", agent)["medals"]["dimensions"]["delivery"]
        == out["rating"]["medals"]["dimensions"]["delivery"]
    )
    assert run("leaderboard", "--dimension", "delivery")["ranked"][0]["agent"] == agent
    assert run("agent", "show", agent)["name"] == "inproc"
    assert [a["id"] for a in run("agent", "list")["agents"]] == [agent]
    buyer = tmp_path / "b.key"
    assert main(["keygen", "--out", str(buyer)]) == 0
    assert main(["agent", "register", "--key", str(buyer), "--name", "buyer"]) == 0
    capsys.readouterr()
    settled = run(
        "settle", agent, "--key", str(buyer), "--role", "buyer", "--delivery", "late", "--deal-id", "d-1"
    )
    assert settled == {
        "index": settled["index"],
        "deal_id": "d-1",
        "about": agent,
        "reporter": settled["reporter"],
    }
    # Text output: the same data as aligned lines.
    assert main(["agent", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["AGENT", "KIND", "NAME"] and len(lines) == 3
