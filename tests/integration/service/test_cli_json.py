"""``--json`` on the commands that print data, and ``-`` for standard input and output."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx

from tests.integration.service.conftest import ServerProcess


def cli(*args: str | int | Path, stdin: bytes | None = None) -> subprocess.CompletedProcess[bytes]:
    r = subprocess.run(
        [sys.executable, "-m", "trustscore.cli.main", *map(str, args)],
        capture_output=True,
        input=stdin,
        timeout=120,
    )
    assert r.returncode == 0, r.stderr
    return r


def test_json_output_and_stdio(server: ServerProcess, tmp_path: Path) -> None:
    key = tmp_path / "a.key"
    made = json.loads(cli("keygen", "--out", key, "--json").stdout)
    assert made["id"].startswith("ts1_") and made["key_file"] == str(key)
    reg = json.loads(
        cli("agent", "register", "--key", key, "--name", "j", "--server", server.url, "--json").stdout
    )
    assert reg["agent"] == made["id"] and isinstance(reg["index"], int)

    vkey = httpx.get(server.url + "/v1/log/key").text.strip()
    for _ in range(100):  # the checkpoint catches up with the registration
        cp = httpx.get(server.url + "/v1/log/checkpoint").text
        if int(cp.splitlines()[1]) > reg["index"]:
            break
    verified = json.loads(
        cli(
            "log", "verify", "--server", server.url, "--verifier-key", vkey, "--index", reg["index"], "--json"
        ).stdout
    )
    assert verified["verified"] and verified["entries"][0]["signer"] == made["id"]
    fsck = json.loads(cli("log", "fsck", "--server", server.url, "--verifier-key", vkey, "--json").stdout)
    assert fsck["clean"] and fsck["problems"] == []

    # Evidence to stdout: stdout holds only the JSONL, the summary goes to stderr.
    r = cli(
        "evidence",
        "export",
        "--server",
        server.url,
        "--verifier-key",
        vkey,
        "--evidence-out",
        "-",
        "--snapshots-out",
        tmp_path / "s.jsonl",
    )
    assert b"evidence items:" in r.stderr
    assert all(json.loads(line) for line in r.stdout.splitlines())
    # ... and scored from stdin.
    cli(
        "score",
        "--weights",
        "weights/trustscore-v1.toml",
        "--evidence",
        "-",
        "--at",
        "2026-11-30T00:00:00Z",
        stdin=r.stdout,
    )
