"""A worker that loses its leases while it is asking an agent (issue #16, docs/operations.md, "Exactly once
per period"): two ``--role worker`` processes and one ``--role api`` on one database; an agent's endpoint
that answers only when the test lets it. The worker carrying out the agent's re-verification run is
paused (SIGSTOP) in the middle of it and its lease connection is ended (as a network partition or
``pg_terminate_backend`` would); the other worker takes every lease over. Then the endpoint must hear
nothing from the new holder about that run, and once the paused worker goes on, the run is logged once.

Before, the new holder claimed the very run the paused worker was carrying out and asked the agent again
(``tests/integration/services/test_run_claims.py`` has the same case at the service level)."""

from __future__ import annotations

import http.server
import signal
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import msgspec
import pytest

from tests.integration.service.conftest import ServerProcess, free_port
from tests.integration.service.test_roles import holders, run_sql, wait
from trustscore.cli.agent import card_envelope
from trustscore.exams.loader import DEFAULT_PUBLIC_DIR, ExamDirs, load_exam
from trustscore.ledger import keys
from trustscore.sdk import agent_from_spec, run_exam
from trustscore.sdk.runner import sign_run
from trustscore.store.leases import NAMESPACE, lease_key

AGENTS = DEFAULT_PUBLIC_DIR.parent / "examples" / "agents" / "scripted.py"
ENV = {
    "TRUSTSCORE_OUTBOUND_ALLOW_LOOPBACK": "true",  # the endpoint listens on 127.0.0.1
    "TRUSTSCORE_LEASE_POLL": "0.1",
    "TRUSTSCORE_REVERIFY_DEADLINE": "30",  # a claim holds its run 45 s
    "TRUSTSCORE_REVERIFY_INTERVAL": "0",  # runs after reports only: the report's run is the one run
}
REVERIFICATION = "https://trustscore.dev/predicates/reverification/v1"


class Endpoint:
    """An agent endpoint on 127.0.0.1 that counts requests and holds each until ``release``."""

    def __init__(self) -> None:
        self.requests = 0
        self.released = threading.Event()
        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                outer.requests += 1
                self.rfile.read(int(self.headers.get("content-length", 0)))
                outer.released.wait(60)
                body = b'{"answer": "I cannot answer that."}'
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.released.set()
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def endpoint() -> Iterator[Endpoint]:
    e = Endpoint()
    yield e
    e.close()


@pytest.fixture
def processes(tmp_path: Path, dsn: str) -> Iterator[dict[str, ServerProcess]]:
    data = tmp_path / "data"
    procs: dict[str, ServerProcess] = {}
    try:
        for name, role in [("w1", "worker"), ("w2", "worker"), ("api", "api")]:
            procs[name] = ServerProcess(
                data, dsn, env={**ENV, "TRUSTSCORE_ROLE": role}, log_path=tmp_path / f"{name}.log"
            )
            procs[name].start()
        yield procs
    finally:
        for p in procs.values():
            if p.proc is not None and p.proc.poll() is None:
                p.proc.send_signal(signal.SIGCONT)
            p.stop()


def test_a_worker_that_loses_its_lease_mid_run_is_not_joined_on_that_run(
    processes: dict[str, ServerProcess], endpoint: Endpoint, dsn: str
) -> None:
    api = processes["api"].url
    agent = keys.SigningKey.generate()
    r = httpx.post(
        f"{api}/v1/log/entries",
        content=msgspec.json.encode(card_envelope(agent, "paused", endpoint=endpoint.url)),
    )
    assert r.status_code == 201, r.text
    run = run_exam(load_exam("integrity@1", ExamDirs()), agent_from_spec(f"python:{AGENTS}:good"))
    r = httpx.post(f"{api}/v1/reports", content=msgspec.json.encode(sign_run(run, agent)), timeout=60)
    assert r.status_code == 201, r.text
    wait(lambda: endpoint.requests > 0, what="the report's run to ask the endpoint")
    holder = holders(dsn)["re-verification"]
    [paused] = [
        p for p in (processes["w1"], processes["w2"]) if p.proc is not None and f"pid={p.proc.pid}" in holder
    ]
    [other] = [p for p in (processes["w1"], processes["w2"]) if p is not paused]
    assert paused.proc is not None and other.proc is not None
    paused.proc.send_signal(signal.SIGSTOP)
    ended = run_sql(
        dsn,
        "SELECT pg_terminate_backend(pid) AS ended FROM pg_locks WHERE locktype = 'advisory' AND classid = $1 "
        "AND objid = $2 AND objsubid = 2 AND granted",
        NAMESPACE,
        lease_key("re-verification") & 0xFFFFFFFF,
    )
    assert [r["ended"] for r in ended] == [True]
    taker = f"pid={other.proc.pid}"
    wait(lambda: taker in holders(dsn).get("re-verification", ""), what="the takeover")
    asked = endpoint.requests
    time.sleep(3.0)  # the new holder polls its queue every 0.5 s
    assert endpoint.requests == asked, "the new holder asked the agent again about the paused worker's run"
    paused.proc.send_signal(signal.SIGCONT)
    endpoint.released.set()

    def logged() -> int:
        rows = run_sql(
            dsn,
            "SELECT count(*) AS n FROM entries WHERE kind = $1 AND subject = $2",
            REVERIFICATION,
            agent.id,
        )
        return int(rows[0]["n"])

    wait(lambda: logged() == 1, seconds=90, what="the run's statement")
    [row] = run_sql(dsn, "SELECT state, attempts FROM reverify_runs WHERE agent = $1", agent.id)
    assert (row["state"], row["attempts"]) == ("done", 1)  # claimed once, closed by the worker that ran it
    time.sleep(1.0)
    assert logged() == 1
