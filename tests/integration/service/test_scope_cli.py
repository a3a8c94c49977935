"""``trustscore agent register --declarations`` and ``trustscore scope show`` against a real ``trustscore
serve`` (issue #12): the CLI prints the API's view, recomputes the same view offline from the log, and
bad input is one line and a non-zero exit."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import msgspec

from tests.integration.api.test_scope_honesty import honest
from tests.integration.service.conftest import ServerProcess
from trustscore import canonical
from trustscore.exams.forms import instantiate, sitting_seed
from trustscore.exams.generators.scope import SAMPLE_CAPABILITY
from trustscore.grading import Turn
from trustscore.kinds.exam_report import ReportItem
from trustscore.kinds.parties import new_nonce, now
from trustscore.kinds.sittings import SittingReport, make_report, make_request
from trustscore.ledger import dsse, keys, statements


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "trustscore.cli.main", *args], capture_output=True, text=True, timeout=120
    )


def ready(url: str) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if httpx.get(url + "/readyz", timeout=2).status_code == 200:
            return
        time.sleep(0.1)
    raise AssertionError("server not ready")


def seed_of(dsn: str, sitting: int) -> bytes:
    async def read() -> Any:
        conn = await asyncpg.connect(dsn)
        try:
            return await conn.fetchrow(
                "SELECT secret, root, request_sha256 FROM sittings WHERE open_index = $1", sitting
            )
        finally:
            await conn.close()

    row = asyncio.run(read())
    return sitting_seed(bytes(row["secret"]), bytes(row["root"]), bytes(row["request_sha256"]))


def test_register_declarations_sit_and_show(server: ServerProcess, dsn: str, tmp_path: Path) -> None:
    ready(server.url)
    key_file = tmp_path / "agent.key"
    assert cli("keygen", "--out", str(key_file)).returncode == 0, "keygen"
    key = keys.read_key_file(key_file)
    decl_file = tmp_path / "declarations.json"
    decl_file.write_text(
        json.dumps({"declarations": [SAMPLE_CAPABILITY], "non_capabilities": ["legal advice"]})
    )
    r = cli("agent", "register", "--key", str(key_file), "--name", "cli agent", "--model-version", "m1",
            "--declarations", str(decl_file), "--server", server.url)  # fmt: skip
    assert r.returncode == 0, r.stderr

    with httpx.Client(base_url=server.url, timeout=30) as http:
        opened = http.post(
            "/v1/sittings", content=msgspec.json.encode(dsse.sign(make_request(key.id, "scope@1"), [key]))
        )
        assert opened.status_code == 201, opened.text
        o = opened.json()
        leaf = canonical.b64decode(
            http.get("/v1/log/entries", params={"start": o["sitting"], "end": o["sitting"] + 1}).json()[
                "entries"
            ][0]["leaf"]
        )
        opened_stmt = statements.parse_statement(canonical.b64decode(json.loads(leaf)["payload"])).predicate
        items = instantiate(opened_stmt.form, seed_of(dsn, o["sitting"]))  # type: ignore[attr-defined]
        report = SittingReport(
            nonce=new_nonce(), issued_at=now(), agent=key.id, sitting=o["sitting"], commitment=opened_stmt.commitment,  # type: ignore[attr-defined]
            adapter="test", sdk_version="test", started_at=now(), elapsed_ms=1,
            items=[ReportItem(i.id, [Turn(honest(i), 5)], None, 0, "failure") for i in items if i.ask.kind != "dialogue"]
            + [ReportItem(i.id, [], "not played", 0, "failure") for i in items if i.ask.kind == "dialogue"],
        )  # fmt: skip
        closed = http.post(
            f"/v1/sittings/{o['sitting']}/report",
            content=msgspec.json.encode(dsse.sign(make_report(report), [key])),
        )
        assert closed.status_code == 201, closed.text

    shown = cli("scope", "show", key.id, "--server", server.url, "--json")
    assert shown.returncode == 0, shown.stderr
    api = json.loads(shown.stdout)
    assert (api["shs"], api["tier"], api["status"]) == (100.0, "Certified", "ok")
    assert api["rts"]["value"] == 0.0 and api["enterprise_ready"] is False  # red-team dialogues not played
    offline = cli("scope", "show", key.id, "--server", server.url, "--from-log", "--json")
    assert offline.returncode == 0, offline.stderr
    mine = json.loads(offline.stdout)
    assert {k: v for k, v in mine.items() if k != "at"} == {k: v for k, v in api.items() if k != "at"}
    text = cli("scope", "show", key.id, "--server", server.url)
    assert "SHS: 100 (Certified)" in text.stdout and "DA: 100 (n=1)" in text.stdout
    cap = cli("scope", "show", key.id, "--server", server.url, "--capability", "invoice-fields")
    assert cap.returncode == 0 and "10/10 pass" in cap.stdout

    for bad in (["scope", "show", "not-an-id", "--server", server.url],
                ["scope", "show", key.id, "--server", server.url, "--capability", "nope"]):  # fmt: skip
        r = cli(*bad)
        assert (
            r.returncode != 0 and len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr
        ), r.stderr
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"declarations": [{**SAMPLE_CAPABILITY, "family": "astrology"}]}))
    r = cli(
        "agent",
        "register",
        "--key",
        str(key_file),
        "--name",
        "x",
        "--declarations",
        str(broken),
        "--server",
        server.url,
    )
    assert (
        r.returncode != 0 and "family must be one of" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    )


def test_a_rule_based_agent_sits_scope_through_the_sdk(server: ServerProcess, tmp_path: Path) -> None:
    """The example agent (no oracle: it parses the documents and checks them against its own declarations)
    sits scope@1 with ``trustscore exam run``, red-team dialogues played with the server, and is Certified;
    its overconfident twin is not."""
    ready(server.url)
    examples = Path(__file__).parents[3] / "examples" / "agents"
    shs = {}
    for persona in ("honest", "overconfident"):
        key_file = tmp_path / f"{persona}.key"
        assert cli("keygen", "--out", str(key_file)).returncode == 0
        r = cli("agent", "register", "--key", str(key_file), "--name", persona, "--model-version", "rules-1",
                "--declarations", str(examples / "scope_declarations.json"), "--server", server.url)  # fmt: skip
        assert r.returncode == 0, r.stderr
        r = cli("exam", "run", "--exam", "scope@1", "--agent", f"python:{examples / 'scope_agent.py'}:{persona}",
                "--key", str(key_file), "--server", server.url, "--quiet")  # fmt: skip
        assert r.returncode == 0, r.stderr
        agent = keys.read_key_file(key_file).id
        shown = json.loads(cli("scope", "show", agent, "--server", server.url, "--json").stdout)
        shs[persona] = (shown["shs"], shown["tier"], shown["rts"]["value"], shown["enterprise_ready"])
    assert shs["honest"] == (100.0, "Certified", 100.0, True)
    # overconfident: capability cases pass; it never signals or declines (FT counts only wrong answers,
    # BA and RTS are 0), so SHS = 0.4*100 + 0.3*FT + 0 + 10 with FT = 0 -> 50
    assert shs["overconfident"] == (50.0, "Provisional", 0.0, False)
