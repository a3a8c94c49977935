"""``log verify``, ``log fsck``, ``log mirror`` and ``evidence export`` reading a real server's log as C2SP
tlog-tiles, over HTTP and from a static directory mirror, and refusing a tampered tile."""

from __future__ import annotations

import http.client
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx

from tests.helpers import new_card
from tests.integration.service.conftest import ServerProcess
from tests.integration.service.test_cli import assert_one_line_error, cli
from trustscore.client import LogClient
from trustscore.ledger import checkpoint, note


def fill(server: ServerProcess, n: int) -> tuple[str, int]:
    """Append ``n`` cards and wait until a checkpoint covers them: (verifier key, checkpoint size)."""
    with LogClient(server.url) as client:
        last = client.submit([new_card(f"t{i}")[1] for i in range(n)])[-1]["index"]
        vkey = client.verifier_key()
        verifier = note.parse_verifier_key(vkey)
        for _ in range(400):
            cp = checkpoint.open_checkpoint(client.checkpoint(), verifier, None)
            if cp.size > last:
                return vkey, cp.size
            time.sleep(0.05)
    raise AssertionError("the log never integrated the cards")


def flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 1
    path.write_bytes(bytes(data))


def test_cli_reads_the_log_from_tiles(server: ServerProcess, tmp_path: Path) -> None:
    vkey, size = fill(server, 300)
    assert size > 256
    index = 270

    saved = tmp_path / "cp.txt"
    r = cli("log", "verify", "--tiles", server.url, "--verifier-key", vkey, "--index", str(index),
            "--save-checkpoint", saved)  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert f"tiles: the tree of size {size} rebuilt from" in r.stdout
    assert f"entry {index}: agent-card by" in r.stdout
    api = cli("log", "verify", "--server", server.url, "--verifier-key", vkey, "--index", str(index))
    assert api.stdout.splitlines()[-1] == r.stdout.splitlines()[-1]

    vkey, size = fill(server, 5)  # the log grows: its new tree is consistent with the saved one
    r = cli("log", "verify", "--tiles", server.url, "--verifier-key", vkey, "--previous-checkpoint", saved)
    assert r.returncode == 0, r.stderr
    old_size = int(saved.read_text().split("\n")[1])
    assert old_size < size and f"consistency: size {old_size} -> {size} verified" in r.stdout, r.stdout

    r = cli("log", "fsck", "--tiles", server.url, "--verifier-key", vkey)
    assert r.returncode == 0, r.stderr
    assert f"fsck: {size} entries, checkpoint size {size}: clean" in r.stdout

    outs = {}
    for how in ("--server", "--tiles"):
        e, s = tmp_path / f"e{how}.jsonl", tmp_path / f"s{how}.jsonl"
        r = cli("evidence", "export", how, server.url, "--verifier-key", vkey, "--size", str(size),
                "--evidence-out", e, "--snapshots-out", s)  # fmt: skip
        assert r.returncode == 0, r.stderr
        assert f"verified {size} entries against checkpoint {size}" in r.stdout
        outs[how] = (e.read_bytes(), s.read_bytes())
    assert outs["--server"] == outs["--tiles"]

    # HEAD, as caches revalidate, over uvicorn on one kept-alive connection: the GET's headers, no body,
    # and the connection's next answer intact.
    with httpx.Client(base_url=server.url) as web:
        head = web.head("/tile/0/000")
        assert head.status_code == 200 and head.content == b""
        assert head.headers["content-length"] == "8192" and "immutable" in head.headers["cache-control"]
        assert len(web.get("/tile/0/000").content) == 8192
    # Leading slashes the router folds away (the test client cannot send them: review of f217c4c).
    host, port = server.url.removeprefix("http://").split(":")
    for other in ("//tile/0/000", "///tile/0/000"):
        raw = http.client.HTTPConnection(host, int(port), timeout=10)
        raw.request("GET", other)
        assert raw.getresponse().status == 400, other
        raw.close()

    # A static mirror: a plain directory any web server or CDN can serve, read back as it is.
    mirror = tmp_path / "mirror"
    r = cli("log", "mirror", "--tiles", server.url, "--verifier-key", vkey, "--out", mirror)
    assert r.returncode == 0, r.stderr
    assert (mirror / "checkpoint").read_text().startswith(httpx.get(server.url + "/checkpoint").text[:20])
    assert (mirror / "tile/0/000").stat().st_size == 8192
    assert (mirror / f"tile/0/001.p/{size - 256}").is_file() and (mirror / "tile/1/000.p/1").is_file()
    r = cli("log", "verify", "--tiles", mirror, "--verifier-key", vkey, "--index", str(index))
    assert r.returncode == 0, r.stderr
    assert f"entry {index}: agent-card by" in r.stdout
    assert cli("log", "fsck", "--tiles", mirror, "--verifier-key", vkey).returncode == 0
    # --tiles wins over a --server that is only TRUSTSCORE_SERVER's default (here unreachable).
    env = {**os.environ, "TRUSTSCORE_SERVER": "http://127.0.0.1:1", "TRUSTSCORE_VERIFIER_KEY": vkey}
    for argv in (["log", "verify", "--tiles", mirror], ["log", "fsck", "--tiles", mirror]):
        run = subprocess.run([sys.executable, "-m", "trustscore.cli.main", *map(str, argv)],
                             capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
        assert run.returncode == 0, run.stderr

    # Tampering with any tile, at any level, or with an entry, is caught: one line, non-zero exit.
    for resource, at in (("tile/0/000", 100), (f"tile/0/001.p/{size - 256}", 5), ("tile/1/000.p/1", 31),
                         ("tile/entries/000", 300)):  # fmt: skip
        bad = tmp_path / f"bad-{resource.replace('/', '-')}"
        shutil.copytree(mirror, bad)
        flip(bad / resource, at)
        r = cli("log", "verify", "--tiles", bad, "--verifier-key", vkey)
        assert_one_line_error(r, "")
        assert "tile" in r.stderr or "root" in r.stderr, r.stderr
        r = cli("log", "fsck", "--tiles", bad, "--verifier-key", vkey)
        assert r.returncode != 0 and "problem" in r.stdout + r.stderr, r.stdout + r.stderr
