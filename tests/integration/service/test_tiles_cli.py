"""``log verify``, ``log fsck``, ``log mirror`` and ``evidence export`` reading a real server's log as C2SP
tlog-tiles, over HTTP and from a static directory mirror, and refusing a tampered tile."""

from __future__ import annotations

import datetime as dt
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
from trustscore.kinds.work_records import Artifact, make_work_record
from trustscore.ledger import checkpoint, dsse, note, statements


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


def test_a_bundle_holding_an_entry_too_large_for_tiles_is_read_from_the_api(
    server: ServerProcess, tmp_path: Path
) -> None:
    """tlog-tiles bundles carry uint16 lengths, and any registered agent can log a larger entry (a
    self-attested work record of ~100 KB): its bundle is a 404, and `log verify --tiles` and `log mirror`
    stopped there with exit 1 (found by a conformance review). Our tools read such a bundle from the same
    server's entries API and check every leaf against its level-0 tile; a mirror cannot hold it."""
    key, card = new_card("big")
    with LogClient(server.url) as client:
        client.submit([card])
        record = make_work_record(
            reporter=key.id, agent=key.id, attestation="self", task_ref="task-1", claimed_outcome="done",
            finished_at=statements.format_time(dt.datetime.now(dt.UTC)),
            artifacts=[Artifact(path=f"src/{i:04d}/" + "a" * 700, sha256_after="00" * 32) for i in range(100)],
        )  # fmt: skip
        index = client.submit_work_record(dsse.sign(record, [key]))["index"]
    vkey, size = fill(server, 1)
    assert size > index
    with httpx.Client(base_url=server.url) as web:
        bundle = web.get(f"/tile/entries/{index // 256:03d}.p/{size - 256 * (index // 256)}")
        assert bundle.status_code == 404 and bundle.json()["type"].endswith("/entry-too-large-for-tiles")

    r = cli("log", "verify", "--tiles", server.url, "--verifier-key", vkey, "--index", str(index))
    assert r.returncode == 0, r.stderr
    assert (
        f"warning: bundle {index // 256} (entries {256 * (index // 256)}..) holds an entry over" in r.stdout
    )
    assert f"entry {index}: work-record by" in r.stdout
    r = cli("log", "fsck", "--tiles", server.url, "--verifier-key", vkey)
    assert r.returncode == 0 and "clean" in r.stdout, r.stdout + r.stderr
    mirror = tmp_path / "mirror"
    r = cli("log", "mirror", "--tiles", server.url, "--verifier-key", vkey, "--out", mirror)
    assert r.returncode == 0, r.stderr
    assert "not mirrored" in r.stdout and not (mirror / "tile" / "entries").exists()
    assert (mirror / "tile/0").is_dir()  # the hash tiles are mirrored: proofs work from the mirror
    # the mirror alone cannot give that bundle's entries (the limit stated in docs/tiles.md)
    assert_one_line_error(cli("log", "verify", "--tiles", mirror, "--verifier-key", vkey), "tile/entries/")
