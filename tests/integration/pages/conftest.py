"""A real ``trustscore serve`` with real data, and the system's headless Chromium driven by Playwright.

The server holds a rated agent (graded integrity and capability exams, a capability medal), a registered agent without evidence and a
rating snapshot every second. The browser is Debian's ``/usr/bin/chromium`` (Playwright never downloads
one here); without it the browser tests are skipped with the reason, unless
``TRUSTSCORE_REQUIRE_BROWSER=1`` (``.ci/run``), which turns the skip into a failure.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import msgspec
import pytest

from tests.conftest import _with_database
from tests.helpers import new_card
from tests.integration.service.conftest import ServerProcess
from trustscore.exams.loader import DEFAULT_PUBLIC_DIR, ExamDirs, load_exam
from trustscore.sdk import agent_from_spec, run_exam
from trustscore.sdk.runner import sign_run
from trustscore.sdk.sitting import SittingClient, sit_on_server

CHROMIUM = os.environ.get("TRUSTSCORE_CHROMIUM", "/usr/bin/chromium")
AGENTS = DEFAULT_PUBLIC_DIR.parent / "examples" / "agents" / "scripted.py"
SNAPSHOTS = 3  # wait for at least this many snapshots of the rated agent


@dataclass
class Site:
    url: str
    rated: str  # a rated agent's id (name "good-agent"), with a capability medal
    fresh: str  # a registered agent without evidence (name "fresh-agent")
    report_index: int  # the log entry of the rated agent's graded report


def browser_or_skip() -> str:
    """The Chromium executable; a skip with the reason when there is none (a failure when required)."""
    if shutil.which(CHROMIUM) or Path(CHROMIUM).is_file():
        return CHROMIUM
    reason = f"no Chromium at {CHROMIUM} (apt-get install -y chromium chromium-driver)"
    if os.environ.get("TRUSTSCORE_REQUIRE_BROWSER") == "1":
        pytest.fail(f"TRUSTSCORE_REQUIRE_BROWSER=1 but {reason}")
    pytest.skip(reason)


def _create(admin: str, name: str, drop: bool = False) -> None:
    """Create (or drop) database ``name`` on its own short-lived event loop (not the session's, which
    ``asyncio.run`` would unset as the current loop)."""

    async def run() -> None:
        conn = await asyncpg.connect(admin)
        try:
            sql = f"DROP DATABASE IF EXISTS {name} WITH (FORCE)" if drop else f"CREATE DATABASE {name}"
            await conn.execute(sql)
        finally:
            await conn.close()

    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(run())
    finally:
        loop.close()


def _post(url: str, path: str, body: Any) -> int:
    r = httpx.post(url + path, content=msgspec.json.encode(body), timeout=60)
    assert r.status_code == 201, r.text
    data = r.json()
    index: int = data["entries"][0]["index"] if "entries" in data else data["evidence_index"]
    return index


def seed(url: str) -> Site:
    """Two agents, one rated by two graded exams; returns once the rated one has ``SNAPSHOTS`` snapshots."""
    key, card = new_card("good-agent")
    fresh, fresh_card = new_card("fresh-agent")
    _post(url, "/v1/log/entries", card)
    _post(url, "/v1/log/entries", fresh_card)
    run = run_exam(load_exam("integrity@1", ExamDirs()), agent_from_spec(f"python:{AGENTS}:good"))
    report = _post(url, "/v1/reports", sign_run(run, key))
    # A fresh capability sitting earns a medal (many real, fresh items over a threshold), so pages show one
    # (a public exam file's items count for the score, never towards a medal: their answers are public).
    with SittingClient(url) as client:
        sit_on_server(client, key, "capability@1", agent_from_spec(f"python:{AGENTS}:good"))
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        r = httpx.get(f"{url}/v1/agents/{key.id}/rating/history", timeout=10)
        if r.status_code == 200 and len(r.json()["points"]) >= SNAPSHOTS:
            return Site(url, key.id, fresh.id, report)
        time.sleep(0.3)
    raise AssertionError(f"no {SNAPSHOTS} snapshots in time: {r.text}")


@pytest.fixture(scope="module")
def site(admin_dsn: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    browser_or_skip()  # only the browser tests use the site: without a browser, start nothing
    name = "ts_pages_" + secrets.token_hex(6)
    _create(admin_dsn, name)
    dsn = _with_database(admin_dsn, name)
    server = ServerProcess(
        tmp_path_factory.mktemp("pages") / "data", dsn, env={"TRUSTSCORE_SNAPSHOT_INTERVAL": "1"}
    )
    server.start()
    try:
        yield seed(server.url)
    finally:
        server.stop()
        _create(admin_dsn, name, drop=True)
        log = server.output()
        assert "Traceback" not in log, log[-3000:]


@pytest.fixture(scope="module")
def chromium() -> Iterator[Any]:
    """A headless Chromium (the system's), shared by a module's tests."""
    executable = browser_or_skip()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=["--no-sandbox"])
        yield browser
        browser.close()
