"""Re-verification end to end: real service, real PostgreSQL, example agents behind real local endpoints.

An honest agent becomes and stays verified; an agent whose endpoint answers differently from its report
loses "verified" and integrity within one run; an endpoint that is down is recorded as such and recovers
when it returns; killing the service mid-run neither loses nor duplicates the run.
"""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import msgspec
import pytest

from tests.integration.service.conftest import ServerProcess, free_port, running, stopping
from trustscore.cli.agent import card_envelope
from trustscore.devserver import AgentProcess
from trustscore.exams.loader import DEFAULT_PUBLIC_DIR, ExamDirs, load_exam
from trustscore.ledger import keys
from trustscore.sdk import agent_from_spec, run_exam
from trustscore.sdk.runner import sign_run

AGENTS = DEFAULT_PUBLIC_DIR.parent / "examples" / "agents"
ENV = {
    "TRUSTSCORE_OUTBOUND_ALLOW_LOOPBACK": "true",  # the example agents listen on 127.0.0.1
    "TRUSTSCORE_REVERIFY_INTERVAL": "1",  # scheduled runs every second: recovery is seen quickly
    "TRUSTSCORE_REVERIFY_DEADLINE": "4",
}


@pytest.fixture
def agents() -> Iterator[Callable[[str], AgentProcess]]:
    """Example agent servers on ports known before they start (an endpoint can be down, then return)."""
    with stopping(lambda persona: AgentProcess(persona, free_port())) as make:
        yield make


@pytest.fixture
def server(tmp_path: Path, dsn: str) -> Iterator[ServerProcess]:
    with running(tmp_path, dsn, ENV) as s:
        yield s


def sit(http: httpx.Client, persona: str, endpoint: str | None, exam: str = "integrity@1") -> tuple[str, int]:
    """Register an agent declaring ``endpoint``, sit ``exam`` as ``persona`` and submit the report."""
    key = keys.SigningKey.generate()
    assert (
        http.post(
            "/v1/log/entries", content=msgspec.json.encode(card_envelope(key, persona, endpoint=endpoint))
        ).status_code
        == 201
    )
    run = run_exam(load_exam(exam, ExamDirs()), agent_from_spec(f"python:{AGENTS / 'scripted.py'}:{persona}"))
    r = http.post("/v1/reports", content=msgspec.json.encode(sign_run(run, key)))
    assert r.status_code == 201, r.text
    return key.id, r.json()["report_index"]


def verification(http: httpx.Client, agent: str) -> dict[str, Any]:
    r = http.get(f"/v1/agents/{agent}/rating")
    if r.status_code != 200:
        return {"verified": False, "history": []}
    data: dict[str, Any] = r.json()["verification"]
    return data


def mark_of(status: dict[str, Any]) -> str:
    """The page's verification mark for a status (api/templates/macros.html, ``verified``)."""
    if status["verified"]:
        return "verified"
    if status["history"]:
        lapsed = status.get("lapsed")
        return "not verified" + (f" ({lapsed.replace('_', ' ')})" if lapsed else "")
    return "never checked"


def page_marks(http: httpx.Client) -> dict[str, str]:
    """Each agent's verification mark in the /leaderboard page's rows (ranked and unranked)."""
    html = http.get("/leaderboard").text
    marks = {}
    for row in re.findall(r"<tr>(.*?)</tr>", html, re.S):
        agent = re.search(r'href="/agents/(ts1_[0-9a-f]{40})"', row)
        mark = re.search(
            r'<span class="(?:ok|warn|unknown)">((?:not )?verified[^<]*|never checked)</span>', row
        )
        if agent and mark:
            marks[agent.group(1)] = mark.group(1)
    return marks


def wait(what: Callable[[], bool], seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if what():
            return
        time.sleep(0.2)
    raise AssertionError("timed out waiting")


def test_honest_liar_and_flaky_agents(server: ServerProcess, agents: Callable[..., AgentProcess]) -> None:
    http = httpx.Client(base_url=server.url, timeout=60)
    good = agents("good").start()
    careless = agents("careless").start()
    flaky = agents("good")  # not started yet: the endpoint is down
    honest, _ = sit(http, "good", good.endpoint)
    liar, _ = sit(http, "good", careless.endpoint)  # reports good answers; its endpoint is careless
    down, _ = sit(http, "good", flaky.endpoint)

    wait(lambda: verification(http, honest)["verified"])
    wait(lambda: any(h["outcome"] == "mismatch" for h in verification(http, liar)["history"]))
    wait(lambda: any(h["outcome"] == "unreachable" for h in verification(http, down)["history"]))
    assert not verification(http, liar)["verified"]
    assert not verification(http, down)["verified"]

    # The mismatch counts against integrity: the liar's integrity is below the honest agent's.
    def integrity(agent: str) -> float:
        return float(
            http.get(f"/v1/agents/{agent}/rating", params={"model": "baseline-v0.3"}).json()["dimensions"][
                "integrity"
            ]["score"]
        )

    wait(lambda: integrity(liar) < integrity(honest))
    # The honest agent stays verified through scheduled runs, each drawing a fresh sample.
    time.sleep(3)
    status = verification(http, honest)
    assert status["verified"] and all(h["outcome"] == "match" for h in status["history"])
    # The flaky endpoint comes back: the next scheduled run matches and it becomes verified.
    flaky.start()
    wait(lambda: verification(http, down)["verified"])
    # The leaderboard page reads its rows' statuses together: each row shows its own agent's, as the rating
    # route gives it (read around the page: a match goes stale after two intervals of 1 s here).
    silent, _ = sit(http, "good", None)  # no endpoint declared: never checked
    watched = (honest, liar, down, silent)

    def rows_match_the_api() -> bool:
        before = {a: mark_of(verification(http, a)) for a in watched}
        marks = page_marks(http)
        after = {a: mark_of(verification(http, a)) for a in watched}
        return before == after and all(marks.get(a) == before[a] for a in watched)

    wait(rows_match_the_api)
    assert mark_of(verification(http, liar)).startswith("not verified")
    assert mark_of(verification(http, silent)) == "never checked"
    # Anyone can recheck a logged run's seed and sample from the log alone.
    entry = verification(http, liar)["history"][0]["index"]
    vkey = http.get("/v1/log/key").text.strip()
    for _ in range(100):
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "trustscore.cli.main",
                "reverify",
                "check",
                "--server",
                server.url,
                "--verifier-key",
                vkey,
                "--index",
                str(entry),
            ],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if r.returncode == 0 or "checkpoint" not in r.stderr:
            break
        time.sleep(0.2)
    assert r.returncode == 0, r.stderr


async def test_killed_mid_run_neither_loses_nor_doubles(
    server: ServerProcess, agents: Callable[..., AgentProcess]
) -> None:
    http = httpx.Client(base_url=server.url, timeout=60)
    hang = agents("hang").start()  # answers nothing: a run takes until its deadline
    agent, report_index = sit(http, "good", hang.endpoint)
    assert server.database_url is not None
    conn = await asyncpg.connect(server.database_url)
    try:
        # Up to 2 minutes: scheduled runs (every second here) against the hanging endpoint may hold the
        # worker for their deadlines before the report's own run is claimed, the longer on a loaded machine.
        for _ in range(2400):
            claimed = await conn.fetchval(
                "SELECT attempts FROM reverify_runs WHERE agent = $1 AND report_index = $2 AND trigger = 'report'",
                agent,
                report_index,
            )
            if claimed:
                break
            await asyncio.sleep(0.05)
        assert claimed, "the run was never started"
        server.kill9()  # mid-run: claimed, not finished
        assert (
            await conn.fetchval(
                "SELECT state FROM reverify_runs WHERE agent = $1 AND report_index = $2 AND trigger = 'report'",
                agent,
                report_index,
            )
            == "pending"
        )
        server.start()
        for _ in range(600):
            state = await conn.fetchval(
                "SELECT state FROM reverify_runs WHERE agent = $1 AND report_index = $2 AND trigger = 'report'",
                agent,
                report_index,
            )
            if state == "done":
                break
            await asyncio.sleep(0.1)
        assert state == "done"
        logged = await conn.fetchval(
            "SELECT count(*) FROM entries WHERE kind = 'https://trustscore.dev/predicates/reverification/v1' "
            "AND subject = $1",
            agent,
        )
        assert logged == 1  # the interrupted run was carried out once, not lost and not doubled
    finally:
        await conn.close()
