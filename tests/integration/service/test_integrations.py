"""MCP and A2A against a real ``trustscore serve`` on real PostgreSQL (docs/integrations.md).

- An A2A agent built with the A2A SDK (examples/agents/a2a_serve.py, a real server on a local port) sits
  an exam through the ``a2a:`` adapter, declares ``a2a:URL`` in its card and is re-verified by the server
  over A2A through the guarded outbound client (loopback allowed by the operator setting, as in the other
  re-verification tests); one that answers over A2A differently from its report is caught.
- The MCP tools are called through the MCP SDK's own client, over streamable HTTP at ``/mcp`` and over
  stdio (a ``trustscore mcp`` subprocess): real data, a real attestation that verifies and a tampered one
  that does not, and every bad input answered as a tool error.
"""

from __future__ import annotations

import base64
import json
import re
import secrets
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import httpx
import msgspec
import pytest
from a2a.client import A2ACardResolver, ClientConfig, create_client
from a2a.helpers import get_data_parts, new_data_part, new_text_part
from a2a.types.a2a_pb2 import Message as A2AMessage
from a2a.types.a2a_pb2 import Role, SendMessageRequest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from tests.integration.service.conftest import ServerProcess, free_port, running, stopping
from trustscore import canonical
from trustscore.cli.agent import card_envelope
from trustscore.errors import InvalidInput
from trustscore.exams.loader import DEFAULT_PUBLIC_DIR, ExamDirs, load_exam
from trustscore.kinds import cards
from trustscore.ledger import dsse, keys, statements
from trustscore.sdk import agent_from_spec, run_exam
from trustscore.sdk.runner import sign_run

AGENTS = DEFAULT_PUBLIC_DIR.parent / "examples" / "agents"
ENV = {
    "TRUSTSCORE_OUTBOUND_ALLOW_LOOPBACK": "true",  # the A2A test agents listen on 127.0.0.1
    "TRUSTSCORE_REVERIFY_INTERVAL": "1",
    "TRUSTSCORE_REVERIFY_DEADLINE": "8",
}


class A2AServer:
    """examples/agents/a2a_serve.py in a subprocess: a scripted persona over A2A."""

    def __init__(self, persona: str, *extra: str) -> None:
        self.port = free_port()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(AGENTS / "a2a_serve.py"),
                "--persona",
                persona,
                "--port",
                str(self.port),
                *extra,
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().startswith("listening on ")
        wait(lambda: _card_ok(self.url), 30)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait()


def _card_ok(url: str) -> bool:
    try:
        return httpx.get(url + "/.well-known/agent-card.json", timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


def wait(what: Callable[[], bool], seconds: float = 90) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if what():
            return
        time.sleep(0.2)
    raise AssertionError("timed out waiting")


@pytest.fixture
def a2a_agents() -> Iterator[Callable[..., A2AServer]]:
    with stopping(A2AServer) as make:
        yield make


@pytest.fixture
def server(tmp_path: Path, dsn: str) -> Iterator[ServerProcess]:
    with running(tmp_path, dsn, ENV) as s:
        yield s


def register_and_report(http: httpx.Client, name: str, endpoint: str | None, agent_spec: str) -> str:
    """Register an agent (declaring ``endpoint``), sit integrity@1 through ``agent_spec``, submit."""
    key = keys.SigningKey.generate()
    r = http.post("/v1/log/entries", content=msgspec.json.encode(card_envelope(key, name, endpoint=endpoint)))
    assert r.status_code == 201, r.text
    agent = agent_from_spec(agent_spec)
    try:
        run = run_exam(load_exam("integrity@1", ExamDirs()), agent)
    finally:
        agent.close()
    r = http.post("/v1/reports", content=msgspec.json.encode(sign_run(run, key)))
    assert r.status_code == 201, r.text
    return key.id


def verification(http: httpx.Client, agent: str) -> dict[str, Any]:
    r = http.get(f"/v1/agents/{agent}/rating")
    if r.status_code != 200:
        return {"verified": False, "history": []}
    data: dict[str, Any] = r.json()["verification"]
    return data


# --- A2A -------------------------------------------------------------------------------------------


def test_a2a_agent_sits_an_exam_and_is_reverified_over_a2a(
    server: ServerProcess, a2a_agents: Callable[..., A2AServer]
) -> None:
    http = httpx.Client(base_url=server.url, timeout=60)
    good = a2a_agents("good")
    as_task = a2a_agents("good", "--as-task")
    careless = a2a_agents("careless")

    # The client-side sitting over A2A answers every item (a scripted good agent fails none).
    agent = agent_from_spec(f"a2a:{good.url}")
    try:
        run = run_exam(load_exam("integrity@1", ExamDirs()), agent)
    finally:
        agent.close()
    errors = [r.response.error for r in run.records if r.response.error]
    assert run.records and not errors, errors
    assert run.adapter == f"a2a:{good.url}"

    honest = register_and_report(http, "a2a honest", f"a2a:{good.url}", f"a2a:{good.url}")
    tasked = register_and_report(http, "a2a task", f"a2a:{as_task.url}", f"a2a:{as_task.url}")
    # Reports good answers, but its A2A endpoint is careless: the server's own A2A run must notice.
    liar = register_and_report(
        http, "a2a liar", f"a2a:{careless.url}", f"python:{AGENTS / 'scripted.py'}:good"
    )
    wait(lambda: verification(http, honest)["verified"])
    wait(lambda: verification(http, tasked)["verified"])
    wait(lambda: any(h["outcome"] == "mismatch" for h in verification(http, liar)["history"]))
    assert not verification(http, liar)["verified"]
    assert http.get(f"/v1/agents/{honest}").json()["endpoint"] == f"a2a:{good.url}"


def test_a2a_endpoint_down_is_unreachable_not_verified(server: ServerProcess) -> None:
    http = httpx.Client(base_url=server.url, timeout=60)
    down = f"a2a:http://127.0.0.1:{free_port()}"
    agent = register_and_report(http, "a2a down", down, f"python:{AGENTS / 'scripted.py'}:good")
    wait(lambda: any(h["outcome"] == "unreachable" for h in verification(http, agent)["history"]))
    assert not verification(http, agent)["verified"]


def test_card_with_a_bad_a2a_endpoint_is_refused(server: ServerProcess) -> None:
    http = httpx.Client(base_url=server.url, timeout=60)
    for endpoint in ("a2a:", "a2a:ftp://example.org/", "a2a:a2a:http://x/", "a2b:http://127.0.0.1/"):
        key = keys.SigningKey.generate()
        card = cards.AgentCard(
            nonce=secrets.token_hex(16),
            issued_at=statements.format_time(datetime.now(UTC)),
            public_key=canonical.b64encode(key.public_key),
            name="bad",
            endpoint=endpoint,
        )
        payload = statements.make_statement(cards.AGENT_CARD, cards.card_subject(key.public_key), card)
        with pytest.raises(InvalidInput, match="endpoint must be an http"):
            statements.parse_statement(payload)  # the client refuses it before sending
        r = http.post("/v1/log/entries", content=msgspec.json.encode(dsse.sign(payload, [key])))
        assert r.status_code == 400, (endpoint, r.text)
        assert r.headers["content-type"].startswith("application/problem+json")
        assert "endpoint must be an http" in r.json()["detail"]


# --- MCP -------------------------------------------------------------------------------------------


def _rated(http: httpx.Client, agent: str) -> dict[str, Any]:
    wait(lambda: http.get(f"/v1/agents/{agent}/rating").status_code == 200)
    body: dict[str, Any] = http.get(f"/v1/agents/{agent}/rating").json()
    return body


def _tampered(bundle: dict[str, Any]) -> dict[str, Any]:
    """The bundle with one attested number changed inside the signed payload."""
    envelope = bundle["attestation"]
    statement = json.loads(base64.b64decode(envelope["payload"]))
    statement["predicate"]["n"] += 1
    forged = base64.b64encode(json.dumps(statement).encode()).decode()
    return {**bundle, "attestation": {**envelope, "payload": forged}}


async def _exercise(client: Client, agent: str, name: str, bundle: dict[str, Any]) -> None:
    """Every tool and resource through the SDK's client, good inputs and bad."""
    tools = {t.name for t in (await client.list_tools()).tools}
    assert tools == {
        "lookup_agent",
        "search_agents",
        "get_rating",
        "leaderboard",
        "outcome_stats",
        "stats_outcomes",  # the same tool under the evidence ladder's source document's name
        "verify_attestation",
    }

    async def ok(tool: str, args: dict[str, Any]) -> dict[str, Any]:
        r = await client.call_tool(tool, args)
        assert not r.is_error, (tool, r.content)
        assert isinstance(r.structured_content, dict)
        return r.structured_content

    async def error(tool: str, args: dict[str, Any], says: str) -> None:
        r = await client.call_tool(tool, args)
        assert r.is_error, (tool, args)
        text = " ".join(getattr(c, "text", "") for c in r.content)
        assert says.lower() in text.lower(), (tool, args, text)
        assert "Traceback" not in text

    looked = await ok("lookup_agent", {"agent_id": agent})
    assert (looked["id"], looked["name"]) == (agent, name)
    found = await ok("search_agents", {"query": name.upper()})
    assert found["agents"][0]["id"] == agent and found["agents"][0]["exact"]
    assert (await ok("search_agents", {"query": agent[:12]}))["agents"][0]["id"] == agent
    # A look-alike spelling finds the agent it imitates, exactly; a part of the name finds it too.
    lookalike = await ok("search_agents", {"query": "C0UNTERPARTY  chec-ker"})
    assert lookalike["agents"][0] == {"id": agent, "name": name, "exact": True}
    assert agent in [a["id"] for a in (await ok("search_agents", {"query": "party"}))["agents"]]
    assert (await ok("search_agents", {"query": "no such agent anywhere"}))["agents"] == []
    rating = await ok("get_rating", {"agent_id": agent})
    assert rating["rating"]["agent"] == agent and rating["rating"]["n"] > 0
    assert "integrity" in rating["rating"]["dimensions"]
    assert f"{rating['rating']['n']} evidence item" in rating["explanation"]
    board = await ok("leaderboard", {"limit": 5})
    assert agent in [r["agent"] for r in board["ranked"]] + [u["agent"] for u in board["unranked"]]
    stats = await ok("outcome_stats", {"group_by": "exam"})
    assert await ok("stats_outcomes", {"group_by": "exam"}) == stats
    assert (await ok("stats_outcomes", {"group_by": "repo"}))["group_by"] == "repo"
    assert stats["group_by"] == "exam" and stats["next"] is None
    # A later page: after a name, from the first answer's tally.
    later = await ok("outcome_stats", {"group_by": "exam", "after": "~", "log_size": stats["log_size"]})
    assert later["groups"] == [] and later["log_size"] == stats["log_size"]
    verified = await ok("verify_attestation", {"bundle": bundle})
    assert verified["verified"] and verified["agent"] == agent
    assert (await ok("verify_attestation", {"bundle": json.dumps(bundle)}))["agent"] == agent

    await error("verify_attestation", {"bundle": _tampered(bundle)}, "not verified")
    await error("verify_attestation", {"bundle": "not json"}, "not verified")
    await error("verify_attestation", {"bundle": {**bundle, "weights_model": "../../etc"}}, "model")
    await error("verify_attestation", {"bundle": bundle, "verifier_key": "nope"}, "not verified")
    await error("lookup_agent", {"agent_id": "ts1-unknown"}, "agent_id")  # malformed: the schema refuses it
    await error("lookup_agent", {"agent_id": "ts1_" + "0" * 40}, "no card")
    await error("lookup_agent", {"agent_id": "x" * 201}, "agent_id")
    await error("get_rating", {"agent_id": agent, "model": "no-such-model"}, "model")
    await error("search_agents", {"query": ""}, "query")
    await error("search_agents", {"query": "a", "limit": 0}, "limit")
    await error("leaderboard", {"dimension": "charm"}, "dimension")
    await error("outcome_stats", {"group_by": "zodiac"}, "group_by")
    await error("outcome_stats", {"group_by": "exam", "after": "a", "log_size": 1}, "first page again")
    await error("outcome_stats", {"group_by": "exam", "after": "a", "log_size": 10**12}, "past the projected")
    await error("outcome_stats", {"group_by": "exam", "log_size": 10**400}, "log_size")  # the schema's bound
    await error("no_such_tool", {}, "no_such_tool")

    listed = {str(r.uri) for r in (await client.list_resources()).resources}
    assert {"trustscore://methodology", "trustscore://weights/trustscore-v2"} <= listed
    doc = await client.read_resource("trustscore://methodology")
    assert "# " in getattr(doc.contents[0], "text", "")
    weights = await client.read_resource("trustscore://weights/trustscore-v2")
    assert (DEFAULT_PUBLIC_DIR.parent / "weights" / "trustscore-v2.toml").read_text() == getattr(
        weights.contents[0], "text", None
    )


def test_mcp_tools_over_http_and_stdio(server: ServerProcess) -> None:
    http = httpx.Client(base_url=server.url, timeout=60)
    name = "Counterparty Checker"
    agent = register_and_report(http, name, None, f"python:{AGENTS / 'scripted.py'}:good")
    _rated(http, agent)
    # Asked at once, while the agent's first evidence is still arriving: the attestation must reproduce
    # (it once answered 500 "attested null, recomputed 34": an all-null rating stamped with a log size
    # that already held the agent's evidence, because a refresh ran while the card was read).
    reply = http.get(f"/v1/agents/{agent}/rating/attestation")
    assert reply.status_code == 200, reply.text
    bundle = reply.json()
    # The tools below read the rating once its report is in it (ratings trail ingest by up to
    # TRUSTSCORE_RATING_LAG and cover it once a projector run finds nothing new: docs/service.md).
    wait(lambda: http.get(f"/v1/agents/{agent}/rating").json()["n"] > 0)

    async def over_http() -> None:
        async with Client(server.url + "/mcp") as client:
            await _exercise(client, agent, name, bundle)

    async def over_stdio() -> None:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "trustscore.cli.main", "mcp", "--server", server.url]
        )
        async with Client(params) as client:
            await _exercise(client, agent, name, bundle)

    anyio.run(over_http)
    anyio.run(over_stdio)

    # The bureau's own A2A card (read by the A2A SDK's resolver) and its skills over A2A.
    async def over_a2a() -> None:
        async with httpx.AsyncClient(timeout=60) as h:
            client = await create_client(server.url, ClientConfig(streaming=False, httpx_client=h))
            card = await A2ACardResolver(h, server.url).get_agent_card()
            assert {s.id for s in card.skills} >= {
                "lookup_agent",
                "get_rating",
                "leaderboard",
                "verify_attestation",
            }
            assert card.supported_interfaces[0].url == server.url + "/a2a/"

            async def ask(*parts: Any) -> dict[str, Any]:
                request = SendMessageRequest(
                    message=A2AMessage(
                        role=Role.ROLE_USER, message_id=secrets.token_hex(8), parts=list(parts)
                    )
                )
                async for event in client.send_message(request):
                    data = get_data_parts(event.message.parts)
                    assert isinstance(data[0], dict)
                    return data[0]
                raise AssertionError("no reply")

            rating = await ask(new_data_part({"skill": "get_rating", "agent_id": agent}))
            assert rating["rating"]["agent"] == agent and "explanation" in rating
            assert (await ask(new_data_part({"skill": "verify_attestation", "bundle": bundle})))["verified"]
            assert (
                "not verified"
                in (await ask(new_data_part({"skill": "verify_attestation", "bundle": _tampered(bundle)})))[
                    "error"
                ]
            )
            assert (await ask(new_text_part(name)))["agents"][0]["id"] == agent
            assert "unknown skill" in (await ask(new_data_part({"skill": "rm -rf"})))["error"]
            assert "limit" in (await ask(new_data_part({"skill": "leaderboard", "limit": 0})))["error"]
            await client.close()

    anyio.run(over_a2a)


def test_mcp_stdio_with_the_server_down_answers_tool_errors() -> None:
    down = f"http://127.0.0.1:{free_port()}"

    async def go() -> None:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "trustscore.cli.main", "mcp", "--server", down]
        )
        async with Client(params) as client:
            r = await client.call_tool("get_rating", {"agent_id": "ts1_" + "0" * 40})
            assert r.is_error
            assert "cannot reach the trustscore server" in getattr(r.content[0], "text", "")

    anyio.run(go)


def test_mcp_command_refuses_a_bad_server_in_one_line() -> None:
    r = subprocess.run(
        [sys.executable, "-m", "trustscore.cli.main", "mcp", "--server", "ftp://example.org"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert r.returncode == 1 and r.stdout == ""
    assert r.stderr.strip() == "trustscore: error: --server must be an http(s) URL, got 'ftp://example.org'"


def test_a2a_agent_sits_a_fresh_server_sitting(
    server: ServerProcess, a2a_agents: Callable[..., A2AServer], tmp_path: Path
) -> None:
    """``trustscore exam run --server --agent a2a:URL``: fresh instances asked over A2A, graded by the
    server, and the sitting checks out from the log."""
    good = a2a_agents("good")

    def cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "trustscore.cli.main", *args],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )

    key = str(tmp_path / "agent.key")
    assert cli("keygen", "--out", key).returncode == 0
    r = cli(
        "agent",
        "register",
        "--key",
        key,
        "--name",
        "a2a sitter",
        "--endpoint",
        f"a2a:{good.url}",
        "--server",
        server.url,
    )
    assert r.returncode == 0, r.stderr
    r = cli(
        "exam",
        "run",
        "--exam",
        "integrity@1",
        "--agent",
        f"a2a:{good.url}",
        "--key",
        key,
        "--server",
        server.url,
    )
    assert r.returncode == 0, r.stderr
    found = re.search(r"sitting (\d+) reported", r.stdout)
    assert found is not None, r.stdout
    verifier = httpx.get(server.url + "/v1/log/key").text.strip()
    r = cli(
        "exam",
        "check-sitting",
        "--server",
        server.url,
        "--verifier-key",
        verifier,
        "--sitting",
        found.group(1),
    )
    assert r.returncode == 0, r.stderr
    assert "grades equal the server's" in r.stdout
