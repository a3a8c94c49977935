"""Adapters turn every kind of agent failure into AgentFailure; specs parse or fail with a named error."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

from trustscore.errors import InvalidInput
from trustscore.sdk.adapters import (
    AgentFailure,
    AgentRequest,
    CallableAgent,
    HttpAgent,
    Message,
    OpenAIAgent,
    SubprocessAgent,
    agent_from_spec,
)

REQ = AgentRequest("x@1", "i-001", 0, [Message("user", "hi")])
ROOT = Path(__file__).resolve().parents[3]


def test_callable_ok_and_failures() -> None:
    assert CallableAgent(lambda r: "yes").ask(REQ, 1) == "yes"
    with pytest.raises(AgentFailure, match="raised ZeroDivisionError"):
        CallableAgent(lambda r: 1 / 0).ask(REQ, 1)
    with pytest.raises(AgentFailure, match="answered int, not text"):
        CallableAgent(lambda r: 5).ask(REQ, 1)
    with pytest.raises(AgentFailure, match=r"no answer within 0\.2 s"):
        CallableAgent(lambda r: time.sleep(30)).ask(REQ, 0.2)


def _script(tmp_path: Path, body: str) -> list[str]:
    path = tmp_path / "agent.py"
    path.write_text(body)
    return [sys.executable, str(path)]


def test_subprocess_round_trip_and_restart(tmp_path: Path) -> None:
    argv = _script(
        tmp_path,
        "import json, sys\n"
        "for line in sys.stdin:\n"
        "    r = json.loads(line)\n"
        "    if r['item_id'] == 'die':\n"
        "        sys.exit(4)\n"
        "    print(json.dumps({'id': r['id'], 'output': r['messages'][-1]['content'].upper()}), flush=True)\n",
    )
    agent = SubprocessAgent(argv)
    try:
        assert agent.ask(REQ, 5) == "HI"
        with pytest.raises(AgentFailure, match="exited with status 4"):
            agent.ask(AgentRequest("x@1", "die", 0, []), 5)
        assert agent.ask(REQ, 5) == "HI"  # restarted
    finally:
        agent.close()


def test_subprocess_hang_garbage_and_missing(tmp_path: Path) -> None:
    hang = SubprocessAgent(_script(tmp_path, "import time\ntime.sleep(3600)\n"))
    with pytest.raises(AgentFailure, match="killed"):
        hang.ask(REQ, 0.3)
    hang.close()
    junk = SubprocessAgent(
        _script(tmp_path, "import sys\nfor l in sys.stdin:\n    print('junk', flush=True)\n")
    )
    with pytest.raises(
        AgentFailure, match=r"no answer within 0\.5 s.*skipped 1 line\(s\) that were not the reply"
    ):
        junk.ask(REQ, 0.5)
    junk.close()
    with pytest.raises(AgentFailure, match="cannot start"):
        SubprocessAgent(["/nonexistent/agent"]).ask(REQ, 1)


def test_http_agents_unreachable() -> None:
    with pytest.raises(AgentFailure, match="cannot reach agent"):
        HttpAgent("http://127.0.0.1:9/").ask(REQ, 1)
    with pytest.raises(AgentFailure, match="cannot reach agent"):
        OpenAIAgent("http://127.0.0.1:9/v1", "m").ask(REQ, 1)


def test_specs() -> None:
    assert agent_from_spec(f"python:{ROOT}/examples/agents/scripted.py:good").label.startswith("python:")
    assert agent_from_spec("python:json:dumps").label == "python:json:dumps"
    assert agent_from_spec("cmd:python agent.py --x").label == "cmd:python agent.py --x"
    assert isinstance(agent_from_spec("http://127.0.0.1:1/agent"), HttpAgent)
    assert isinstance(agent_from_spec("http:http://127.0.0.1:1/agent"), HttpAgent)
    a = agent_from_spec("openai:llama3@http://127.0.0.1:1/v1")
    assert isinstance(a, OpenAIAgent)
    assert a.model == "llama3"
    for bad, msg in [
        ("telnet:x", "unknown agent spec"),
        ("openai:http://x/v1", "openai:MODEL@BASE_URL"),
        ("python:nomodule_xyz:f", "cannot import"),
        ("python:json:nothing_here", "no callable"),
        ("python:missing.py:f", "cannot load agent file"),
        ("cmd:", "needs a command"),
    ]:
        with pytest.raises(InvalidInput, match=msg):
            agent_from_spec(bad)
