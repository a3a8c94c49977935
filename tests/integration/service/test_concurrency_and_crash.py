"""Many concurrent submitters, and kill -9 under load: indexes stay contiguous, the log consistent."""

from __future__ import annotations

import asyncio
import base64
import random
import subprocess
import sys
import threading

import httpx
import msgspec

from tests.helpers import new_card
from tests.integration.service.conftest import ServerProcess
from trustscore.ledger import checkpoint, dsse, merkle, note


def fsck_db(dsn: str | None) -> str:
    assert dsn is not None
    r = subprocess.run(
        [sys.executable, "-m", "trustscore.cli.main", "log", "fsck", "--database-url", dsn],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return r.stdout


async def watch_checkpoints(url: str, stop: asyncio.Event, seen: list[checkpoint.Checkpoint]) -> None:
    """Fetch checkpoints as they come and check each is consistent with the one before."""
    async with httpx.AsyncClient(base_url=url, timeout=30) as http:
        verifier = note.parse_verifier_key((await http.get("/v1/log/key")).text.strip())
        while not stop.is_set():
            cp = checkpoint.open_checkpoint((await http.get("/v1/log/checkpoint")).text, verifier, None)
            if seen and cp.size > seen[-1].size:
                r = await http.get("/v1/log/proof/consistency", params={"from": seen[-1].size, "to": cp.size})
                proof = [base64.b64decode(h) for h in r.json()["proof"]]
                checkpoint.verify_consistent(seen[-1], cp, proof)
            if not seen or cp.size > seen[-1].size:
                seen.append(cp)
            await asyncio.sleep(0.02)


async def test_concurrent_submitters_get_contiguous_indexes(server: ServerProcess) -> None:
    rng = random.Random(7)
    batches = [[new_card(f"a{i}-{j}")[1] for j in range(rng.randint(1, 12))] for i in range(80)]
    stop = asyncio.Event()
    seen: list[checkpoint.Checkpoint] = []
    watcher = asyncio.create_task(watch_checkpoints(server.url, stop, seen))
    got: list[int] = []

    async def submitter(mine: list[list[dsse.Envelope]]) -> None:
        async with httpx.AsyncClient(base_url=server.url, timeout=60) as http:
            for batch in mine:
                r = await http.post("/v1/log/entries", content=msgspec.json.encode(batch))
                assert r.status_code == 201, r.text
                got.extend(e["index"] for e in r.json()["entries"])

    await asyncio.gather(*(submitter(batches[k::10]) for k in range(10)))
    total = sum(len(b) for b in batches)
    assert sorted(got) == list(range(2, total + 2))  # entries 0, 1: the service cards
    while not seen or seen[-1].size < total + 2:
        await asyncio.sleep(0.05)
    stop.set()
    await watcher
    assert len(seen) >= 2
    assert "clean" in fsck_db(server.database_url)


def test_kill_9_under_load_loses_nothing_acknowledged(server: ServerProcess) -> None:
    acknowledged: dict[int, bytes] = {}
    lock = threading.Lock()
    halt = threading.Event()

    def load(seed: int) -> None:
        rng = random.Random(seed)
        with httpx.Client(base_url=server.url, timeout=10) as http:
            while not halt.is_set():
                batch = [new_card(f"crash-{seed}")[1] for _ in range(rng.randint(1, 30))]
                try:
                    r = http.post("/v1/log/entries", content=msgspec.json.encode(batch))
                except httpx.HTTPError:
                    return  # the server died mid-request: nothing was acknowledged
                if r.status_code == 201:
                    with lock:
                        for env, e in zip(batch, r.json()["entries"], strict=True):
                            acknowledged[e["index"]] = dsse.leaf_bytes(env)

    threads = [threading.Thread(target=load, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    while len(acknowledged) < 300:
        threading.Event().wait(0.02)
    server.kill9()
    halt.set()
    for t in threads:
        t.join()

    server.start()  # same data dir, same database: just works
    with httpx.Client(base_url=server.url, timeout=30) as http:
        top = max(acknowledged) + 1
        rows: dict[int, bytes] = {}
        start = 0
        while start < top:
            page = http.get("/v1/log/entries", params={"start": start, "end": top}).json()["entries"]
            assert page, f"entries from {start} are missing after restart"
            for e in page:
                rows[e["index"]] = base64.b64decode(e["leaf"])
            start = page[-1]["index"] + 1
        for index, leaf in acknowledged.items():
            assert rows[index] == leaf, f"acknowledged entry {index} changed or vanished"
        # New appends after the restart continue the same log.
        r = http.post("/v1/log/entries", content=msgspec.json.encode(new_card("after")[1]))
        assert r.status_code == 201
        after = r.json()["entries"][0]["index"]
        verifier = note.parse_verifier_key(http.get("/v1/log/key").text.strip())
        for _ in range(500):
            cp = checkpoint.open_checkpoint(http.get("/v1/log/checkpoint").text, verifier, None)
            if cp.size > after:
                break
            threading.Event().wait(0.02)
        assert cp.size > after
        proof = [
            base64.b64decode(h)
            for h in http.get("/v1/log/proof/inclusion", params={"index": 0, "size": cp.size}).json()["proof"]
        ]
        merkle.verify_inclusion(merkle.leaf_hash(acknowledged.get(0, rows[0])), 0, cp.size, proof, cp.root)
    assert "clean" in fsck_db(server.database_url)
