"""The process helper the demo, the tests and the benchmarks share (``trustscore.devserver``): a start that
fails says why in one line and leaves nothing running; a stop also stops the embedded PostgreSQL."""

from __future__ import annotations

import socket
import time
from pathlib import Path

import httpx
import pytest

from trustscore.devserver import AgentProcess, ServeProcess, check_port_free
from trustscore.errors import InvalidInput, StorageError


def _postmaster_alive(pg_dir: Path) -> bool:
    try:
        pid = int((pg_dir / "postmaster.pid").read_text().split("\n", 1)[0])
    except (OSError, ValueError):
        return False
    return Path(f"/proc/{pid}").exists()


def test_a_serve_that_exits_during_start_up_is_one_line_and_leaves_nothing(tmp_path: Path, dsn: str) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        with pytest.raises(InvalidInput, match=f"port {port} is not free"):
            check_port_free(port)
        server = ServeProcess(tmp_path / "data", dsn, port=port, start_timeout=60)
        with pytest.raises(StorageError) as raised:
            server.start()
    message = raised.value.message
    assert "exited during start-up" in message and f"cannot listen on 127.0.0.1:{port}" in message, message
    assert "\n" not in message
    assert server.proc is not None and server.proc.poll() is not None


def test_stop_stops_the_embedded_postgresql_it_served(tmp_path: Path) -> None:
    server = ServeProcess(tmp_path / "data")
    with server:
        assert httpx.get(server.url + "/readyz", timeout=5).status_code == 200
        assert server.verifier_key().startswith("trustscore.local/log+")
        assert _postmaster_alive(tmp_path / "data" / "pg")
    assert server.proc is not None and server.proc.returncode is not None
    deadline = time.monotonic() + 30
    while _postmaster_alive(tmp_path / "data" / "pg") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _postmaster_alive(tmp_path / "data" / "pg"), "the embedded PostgreSQL kept running"


def test_an_agent_server_that_cannot_start_says_why(tmp_path: Path) -> None:
    log = tmp_path / "agent.log"
    agent = AgentProcess("no-such-persona", log_path=log)
    with pytest.raises(StorageError, match="example agent server for no-such-persona did not start"):
        agent.start()
    assert agent.proc is None  # stopped and forgotten
    with pytest.raises(InvalidInput, match="start it first"):
        _ = agent.endpoint


def test_an_agent_server_on_port_0_reports_the_port_it_took(tmp_path: Path) -> None:
    with AgentProcess("good", log_path=tmp_path / "agent.log") as agent:
        assert agent.endpoint.startswith("http://127.0.0.1:") and agent.endpoint.endswith("/agent")
        reply = httpx.post(agent.endpoint, json={"messages": [{"role": "user", "content": "hi"}]}, timeout=10)
        assert reply.status_code == 200, reply.text
        proc = agent.proc
    assert agent.proc is None and proc is not None and proc.returncode is not None  # stopped and reaped
