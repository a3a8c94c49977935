"""Adapters turn every kind of agent failure into AgentFailure; specs parse or fail with a named error."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from trustscore.errors import InvalidInput
from trustscore.sdk.adapters import (
    MAX_SKIPPED_LINES,
    AgentFailure,
    AgentRequest,
    AgentUnreachable,
    CallableAgent,
    HttpAgent,
    Message,
    OpenAIAgent,
    PythonAgent,
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
    for spec in (f"python:{ROOT}/examples/agents/scripted.py:good", "python:json:dumps"):
        agent = agent_from_spec(spec)
        assert agent.label == spec
        agent.close()
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


def test_subprocess_skips_stray_and_stale_lines(tmp_path: Path) -> None:
    argv = _script(
        tmp_path,
        "import json, sys\n"
        "print('booting', flush=True)\n"
        "for line in sys.stdin:\n"
        "    r = json.loads(line)\n"
        "    print(json.dumps({'id': r['id'] - 1, 'output': 'stale'}), flush=True)\n"
        "    print('[1, 2]', flush=True)\n"
        "    print(json.dumps({'id': r['id'], 'output': 'fresh ' + str(r['id'])}), flush=True)\n",
    )
    agent = SubprocessAgent(argv)
    try:
        assert [agent.ask(REQ, 5) for _ in range(3)] == ["fresh 1", "fresh 2", "fresh 3"]
    finally:
        agent.close()


def test_subprocess_flood_of_stray_lines_fails_the_item_within_bounds(tmp_path: Path) -> None:
    argv = _script(
        tmp_path,
        "import json, sys\n"
        "for line in sys.stdin:\n"
        "    r = json.loads(line)\n"
        "    if r['item_id'] == 'flood':\n"
        "        while True:\n"
        "            print('x' * 100, flush=True)\n"
        "    print(json.dumps({'id': r['id'], 'output': 'ok'}), flush=True)\n",
    )
    agent = SubprocessAgent(argv)
    try:
        with pytest.raises(AgentFailure, match=f"more than {MAX_SKIPPED_LINES} lines that are not the reply"):
            agent.ask(AgentRequest("x@1", "flood", 0, []), 30)
        assert agent.ask(REQ, 5) == "ok"  # restarted, in step again
    finally:
        agent.close()


def test_subprocess_error_reply_fails_the_item(tmp_path: Path) -> None:
    argv = _script(
        tmp_path,
        "import json, sys\n"
        "for line in sys.stdin:\n"
        "    r = json.loads(line)\n"
        "    print(json.dumps({'id': r['id'], 'error': 'model\\noverloaded'}), flush=True)\n",
    )
    agent = SubprocessAgent(argv)
    try:
        with pytest.raises(AgentFailure, match=r"^model overloaded$"):
            agent.ask(REQ, 5)
    finally:
        agent.close()


def test_python_agent_runs_in_a_child_process(tmp_path: Path) -> None:
    path = tmp_path / "agent.py"
    path.write_text(
        "import os, time\n"
        "def pid(r):\n    return str(os.getpid())\n"
        "def hang(r):\n    time.sleep(3600)\n"
        "def exits(r):\n    os._exit(7)\n"
        "def number(r):\n    return 5\n"
    )
    agent = PythonAgent(f"{path}:pid")
    try:
        child = agent.ask(REQ, 10)
        assert child != str(os.getpid())
    finally:
        agent.close()
    for fn, match in [("hang", r"no answer within 0\.5 s; agent process killed"),
                      ("exits", "agent process exited with status 7"), ("number", "answered int, not text")]:  # fmt: skip
        agent = PythonAgent(f"{path}:{fn}")
        try:
            with pytest.raises(AgentFailure, match=match):
                agent.ask(REQ, 0.5)
        finally:
            agent.close()


def test_python_agent_that_dies_while_loading_is_invalid_input(tmp_path: Path) -> None:
    path = tmp_path / "agent.py"
    path.write_text("import os\nos._exit(5)\n")
    with pytest.raises(InvalidInput, match="exited with status 5 while loading"):
        PythonAgent(f"{path}:fn")
    path.write_text("raise SystemExit('no config')\n")
    with pytest.raises(InvalidInput, match="SystemExit: no config"):
        PythonAgent(f"{path}:fn")


def test_connection_refused_is_unreachable_but_a_hang_is_not() -> None:
    with pytest.raises(AgentUnreachable):
        HttpAgent("http://127.0.0.1:9/").ask(REQ, 1)
    with pytest.raises(AgentUnreachable):
        SubprocessAgent(["/nonexistent/agent"]).ask(REQ, 1)


def test_subprocess_that_closes_stdout_and_lives_on_does_not_hang_the_runner(tmp_path: Path) -> None:
    agent = SubprocessAgent(_script(tmp_path, "import os, time\nos.close(1)\ntime.sleep(3600)\n"))
    start = time.monotonic()
    try:
        with pytest.raises(AgentFailure, match="closed its output; killed"):
            agent.ask(REQ, 1)
    finally:
        agent.close()
    assert time.monotonic() - start < 10


class _Hostile(BaseHTTPRequestHandler):
    """An agent endpoint that drips its answer one byte at a time or sends one far too large."""

    def log_message(self, *_: object) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        try:
            if self.path == "/drip":
                self.send_header("Content-Length", "100")
                self.end_headers()
                for _ in range(100):
                    self.wfile.write(b" ")
                    self.wfile.flush()
                    time.sleep(0.3)
            else:
                self.send_header("Content-Length", str(64 * 2**20 + 14))
                self.end_headers()
                self.wfile.write(b'{"output": "')
                for _ in range(64):
                    self.wfile.write(b"x" * 2**20)
                self.wfile.write(b'"}')
        except OSError:  # the client hung up, as it should
            pass


@pytest.fixture
def hostile_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Hostile)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def test_http_agent_that_drips_its_answer_fails_within_the_item_timeout(hostile_url: str) -> None:
    """Review of #17: httpx's timeout is per read, so a byte every 0.3 s held a 1 s item for 30 s."""
    start = time.monotonic()
    with pytest.raises(AgentFailure, match="no answer within 1 s"):
        HttpAgent(hostile_url + "/drip").ask(REQ, 1)
    assert time.monotonic() - start < 2.5


def test_http_agent_answer_larger_than_the_bound_is_refused_unread(hostile_url: str) -> None:
    """Review of #17: a 300 MiB answer was read whole into the CLI's memory before being truncated."""
    with pytest.raises(AgentFailure, match="larger than"):
        HttpAgent(hostile_url + "/big").ask(REQ, 10)


def test_subprocess_reply_with_invalid_utf8_is_replaced_not_waited_out(tmp_path: Path) -> None:
    """Review of #17: a reply line with one invalid UTF-8 byte was skipped as "not the reply", so the
    item waited out its whole timeout and failed; now the byte reads as U+FFFD."""
    argv = _script(
        tmp_path,
        "import json, sys\n"
        "for line in sys.stdin:\n"
        "    r = json.loads(line)\n"
        '    sys.stdout.buffer.write(b\'{"id": %d, "output": "caf\\xe9 ok"}\\n\' % r[\'id\'])\n'
        "    sys.stdout.flush()\n",
    )
    agent = SubprocessAgent(argv)
    try:
        start = time.monotonic()
        assert agent.ask(REQ, 5) == "caf\ufffd ok"
        assert time.monotonic() - start < 2
    finally:
        agent.close()
