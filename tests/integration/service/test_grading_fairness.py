"""Grading cannot be monopolised (issue #17): hostile reports whose code answers sleep do not starve an
honest signer on a real server, a signer gets one report in grading at a time (429 with Retry-After),
and a report's sandbox budget ends its sleeping answers after one timeout instead of sixteen."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from tests.helpers import new_card
from tests.integration.service.conftest import ServerProcess
from trustscore.exams.loader import DEFAULT_PUBLIC_DIR, ExamDirs, load_exam
from trustscore.exams.reporting import build_report
from trustscore.grading import Turn
from trustscore.kinds.exam_report import ReportItem
from trustscore.ledger import dsse, keys
from trustscore.sdk import agent_from_spec, run_exam
from trustscore.sdk.runner import sign_run

AGENTS = DEFAULT_PUBLIC_DIR.parent / "examples" / "agents" / "scripted.py"
EXAM = load_exam("capability@1", ExamDirs())


def sleeping_report(key: keys.SigningKey) -> bytes:
    def answer(item: Any) -> str:
        return f"```python\nimport time\ndef {item.args.get('function', 'f')}(*a):\n    time.sleep(600)\n```"

    items = [ReportItem(i.id, [Turn(answer(i), 5)], None, 0, "failure") for i in EXAM.items]
    env = build_report(EXAM, items, adapter="test", started_at="2026-11-30T00:00:00Z", elapsed_ms=1, key=key)
    return msgspec.json.encode(env)


@pytest.fixture
def budget_server(tmp_path: Path, dsn: str) -> Any:
    # One sleeping answer (the exam's 10 s wall limit) spends a 5 s budget; the rest fail unrun.
    s = ServerProcess(
        tmp_path / "data", dsn, env={"TRUSTSCORE_GRADING_BUDGET": "5", "TRUSTSCORE_GRADING_SLOTS": "4"}
    )
    s.start()
    yield s
    s.stop()


async def register(client: httpx.AsyncClient, name: str) -> keys.SigningKey:
    key, card = new_card(name)
    r = await client.post("/v1/log/entries", content=msgspec.json.encode(card))
    assert r.status_code == 201, r.text
    return key


def sign(env: dsse.Envelope) -> bytes:
    return msgspec.json.encode(env)


def _from(server: ServerProcess, address: str) -> httpx.AsyncClient:
    """A client whose requests come from ``address`` (any 127.0.0.0/8 address is this machine)."""
    transport = httpx.AsyncHTTPTransport(local_address=address)
    return httpx.AsyncClient(base_url=server.url, timeout=120, transport=transport)


async def test_sleeping_reports_do_not_starve_an_honest_signer(budget_server: ServerProcess) -> None:
    honest_run = run_exam(EXAM, agent_from_spec(f"python:{AGENTS}:good"))
    async with (
        _from(budget_server, "127.0.0.2") as first,
        _from(budget_server, "127.0.0.3") as second,
        _from(budget_server, "127.0.0.4") as client,
    ):
        hostile = [await register(client, f"hostile-{n}") for n in range(4)]
        honest = await register(client, "honest")
        started = time.monotonic()
        attacks = [
            asyncio.create_task(c.post("/v1/reports", content=sleeping_report(k)))
            for c, k in ((first, hostile[0]), (second, hostile[1]))
        ]
        await asyncio.sleep(1.5)  # both are asleep in the sandbox now, each holding a grading slot

        again = await client.post("/v1/reports", content=sleeping_report(hostile[0]))
        assert again.status_code == 429, again.text
        assert "one report per signer" in again.json()["detail"] and int(again.headers["retry-after"]) >= 1
        # Fresh keys (keys are free) from the same client get it half the slots at most (review of #17).
        attacks.append(asyncio.create_task(first.post("/v1/reports", content=sleeping_report(hostile[2]))))
        await asyncio.sleep(1.0)
        sybil = await first.post("/v1/reports", content=sleeping_report(hostile[3]))
        assert sybil.status_code == 429, sybil.text
        assert "per client address" in sybil.json()["detail"]

        t0 = time.monotonic()
        r = await client.post("/v1/reports", content=sign(sign_run(honest_run, honest)))
        assert r.status_code == 201, r.text
        assert time.monotonic() - t0 < 5.0
        assert not any(a.done() for a in attacks)
        code = [i for i in r.json()["items"] if i["grader"] == "python-tests@1"]
        assert len(code) == 16 and all(i["value_millis"] == 1000 for i in code)

        for attack in attacks:
            done = await attack
            assert done.status_code == 201, done.text
            code = [i for i in done.json()["items"] if i["grader"] == "python-tests@1"]
            assert all(i["value_millis"] == 0 for i in code)
            assert sum("timeout" in i["detail"] for i in code) == 1
            assert all("budget of 5 s is spent" in i["detail"] for i in code if "timeout" not in i["detail"])
        assert time.monotonic() - started < 30  # one 10 s timeout per report, not sixteen


def _started(pid: int) -> str | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    return None if fields[0] == "Z" else fields[19]


def _tree(root: int) -> dict[int, str]:
    """Live descendants of ``root`` with their start times (so a reused PID is not mistaken for one)."""
    table: dict[int, tuple[int, str]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            if fields[0] != "Z":
                table[int(entry.name)] = (int(fields[1]), fields[19])
    found: dict[int, str] = {}
    frontier = [root]
    while frontier:
        parent = frontier.pop()
        for pid, (ppid, started) in table.items():
            if ppid == parent:
                found[pid] = started
                frontier.append(pid)
    return found


async def test_kill_9_of_the_server_mid_grading_leaves_no_sandboxed_process(
    budget_server: ServerProcess,
) -> None:
    assert budget_server.proc is not None
    async with httpx.AsyncClient(base_url=budget_server.url, timeout=120) as client:
        key = await register(client, "sleeper")
        attack = asyncio.create_task(client.post("/v1/reports", content=sleeping_report(key)))
        await asyncio.sleep(2.0)  # its first answer is asleep in a sandbox
        tree = _tree(budget_server.proc.pid)
        assert len(tree) >= 4, (
            tree
        )  # zygote, the running launcher, its PID 1 and the candidate (+ a warm one)
        budget_server.kill9()
        with contextlib.suppress(httpx.HTTPError):
            await attack
    deadline = time.monotonic() + 5
    alive = tree
    while alive and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
        alive = {pid: s for pid, s in tree.items() if _started(pid) == s}
    for pid in alive:  # never leave them behind, even when failing
        os.kill(pid, signal.SIGKILL)
    assert alive == {}
