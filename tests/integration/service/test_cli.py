"""The command line against a real server: one-line errors, never a traceback."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import httpx
import msgspec

from tests.integration.service.conftest import ServerProcess, free_port
from trustscore.kinds.parties import make_party_card
from trustscore.ledger import dsse, keys
from trustscore.store import embedded


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trustscore.cli.main", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=120,
    )


def assert_one_line_error(r: subprocess.CompletedProcess[str], words: str) -> None:
    assert r.returncode != 0
    assert "Traceback" not in r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("trustscore: error:"), r.stderr
    assert words in lines[0], r.stderr


def test_keygen_register_verify_fsck(server: ServerProcess, tmp_path: Path) -> None:
    key = tmp_path / "agent.key"
    r = cli("keygen", "--out", key)
    assert r.returncode == 0, r.stderr
    assert stat.S_IMODE(os.stat(key).st_mode) == 0o600
    agent_id = r.stdout.split()[1]
    assert_one_line_error(cli("keygen", "--out", key), "refusing to overwrite")

    r = cli(
        "agent",
        "register",
        "--key",
        key,
        "--name",
        "demo",
        "--endpoint",
        "http://127.0.0.1:1/x",
        "--server",
        server.url,
    )
    assert r.returncode == 0, r.stderr
    assert f"agent: {agent_id}" in r.stdout
    index = int(r.stdout.split("index:")[1])
    assert_one_line_error(
        cli(
            "agent",
            "register",
            "--key",
            key,
            "--name",
            "x",
            "--endpoint",
            "ftp://nope",
            "--server",
            server.url,
        ),
        "endpoint must be an http(s) URL",
    )
    assert_one_line_error(
        cli("agent", "register", "--key", tmp_path / "missing.key", "--name", "x", "--server", server.url),
        "does not exist",
    )
    dead = f"http://127.0.0.1:{free_port()}"
    assert_one_line_error(
        cli("agent", "register", "--key", key, "--name", "x", "--server", dead), "cannot reach"
    )

    vkey = httpx.get(server.url + "/v1/log/key").text.strip()
    saved = tmp_path / "cp.txt"
    r = cli("log", "verify", "--server", server.url, "--verifier-key", vkey, "--save-checkpoint", saved)
    while "size 0," in r.stdout:  # wait for the integrator to cover the card
        r = cli("log", "verify", "--server", server.url, "--verifier-key", vkey, "--save-checkpoint", saved)
    assert r.returncode == 0, r.stderr
    for i in range(5):
        k = tmp_path / f"more{i}.key"
        cli("keygen", "--out", k)
        assert cli("agent", "register", "--key", k, "--name", f"m{i}", "--server", server.url).returncode == 0
    r = cli(
        "log",
        "verify",
        "--server",
        server.url,
        "--verifier-key",
        vkey,
        "--index",
        str(index),
        "--previous-checkpoint",
        saved,
    )
    assert r.returncode == 0, r.stderr
    assert "consistency" in r.stdout and f"entry {index}: agent-card by {agent_id}" in r.stdout

    other = tmp_path / "other.key"
    cli("keygen", "--out", other)
    from trustscore.ledger import keys, note

    wrong = note.make_verifier_key("trustscore.local/log", keys.read_key_file(other).public_key)
    assert_one_line_error(cli("log", "verify", "--server", server.url, "--verifier-key", wrong), "")

    r = cli("log", "fsck", "--server", server.url, "--verifier-key", vkey)
    assert r.returncode == 0 and "clean" in r.stdout, r.stdout + r.stderr
    assert server.database_url is not None
    r = cli("log", "fsck", "--database-url", server.database_url)
    assert r.returncode == 0 and "clean" in r.stdout, r.stdout + r.stderr


def test_embedded_default_survives_kill_9(tmp_path: Path) -> None:
    s = ServerProcess(tmp_path / "data", None)
    s.start()
    try:
        assert "embedded PostgreSQL" in s.output() and "log verifier key: trustscore.local/log+" in s.output()
        key = tmp_path / "a.key"
        cli("keygen", "--out", key)
        assert cli("agent", "register", "--key", key, "--name", "a", "--server", s.url).returncode == 0
        vkey = httpx.get(s.url + "/v1/log/key").text
        s.kill9()
        s.start()
        assert httpx.get(s.url + "/v1/log/key").text == vkey
        # two service cards and the agent
        assert len(httpx.get(s.url + "/v1/log/entries").json()["entries"]) == 3
    finally:
        s.stop()
    try:
        r = cli("log", "fsck", "--data-dir", tmp_path / "data")
        assert r.returncode == 0 and "3 entries" in r.stdout, r.stdout + r.stderr
    finally:
        embedded.stop(tmp_path / "data" / "pg")


def test_operator_approves_and_retires_a_marketplace(server: ServerProcess, tmp_path: Path) -> None:
    """Only the log key approves a marketplace; bad input is a one-line error."""
    market = keys.SigningKey.generate()
    card = dsse.sign(make_party_card(market.public_key, "market", "marketplace"), [market])
    posted = httpx.post(server.url + "/v1/log/entries", content=msgspec.json.encode(card))
    assert posted.status_code == 201, posted.text
    log_key = server.data_dir / "log.key"
    for action in ("approve-marketplace", "retire-marketplace"):
        r = cli("operator", action, market.id, "--log-key", log_key, "--server", server.url)
        assert r.returncode == 0, r.stderr
        assert market.id in r.stdout and "index:" in r.stdout
    assert_one_line_error(
        cli("operator", "approve-marketplace", "not-a-key", "--log-key", log_key, "--server", server.url),
        "marketplace",
    )
    assert_one_line_error(
        cli(
            "operator",
            "approve-marketplace",
            market.id,
            "--log-key",
            tmp_path / "none",
            "--server",
            server.url,
        ),
        "no log key",
    )
    other = tmp_path / "other.key"
    assert cli("keygen", "--out", other).returncode == 0
    assert_one_line_error(
        cli("operator", "approve-marketplace", market.id, "--log-key", other, "--server", server.url),
        "no registered key",  # only the log key may sign it
    )
