"""kill -9 between the cause and the delivery loses nothing: a real ``trustscore serve`` is killed while
events wait in the outbox (the receiver is down) and again while deliveries are in flight; after each
restart every event reaches the receiver, each id accepted once, in log order per agent."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest

from tests.integration.service.conftest import ServerProcess
from tests.integration.webhooks.parties import agent_card, market_card, negative_event, subscription
from tests.integration.webhooks.receiver import Receiver
from trustscore.cli.main import main
from trustscore.ledger import keys

ENV = {
    "TRUSTSCORE_OUTBOUND_ALLOW_LOOPBACK": "true",
    "TRUSTSCORE_PROJECT_INTERVAL": "0.05",
    "TRUSTSCORE_WEBHOOK_INTERVAL": "0.05",
    "TRUSTSCORE_WEBHOOK_BACKOFF_BASE": "0.1",
    "TRUSTSCORE_WEBHOOK_BACKOFF_CAP": "0.5",
    "TRUSTSCORE_WEBHOOK_MAX_ATTEMPTS": "100",  # the receiver is down longer than 8 quick tries
}


@pytest.fixture
def webhook_server(tmp_path: Path, dsn: str) -> Iterator[ServerProcess]:
    s = ServerProcess(tmp_path / "data", dsn, env=dict(ENV))
    s.start()
    yield s
    s.stop()


def post(server: ServerProcess, path: str, content: bytes) -> int:
    r = httpx.post(server.url + path, content=content, timeout=30)
    assert r.status_code == 201, r.text
    out = r.json()
    index: int = out["entries"][0]["index"] if "entries" in out else out["index"]
    return index


def wait(check: Callable[[], bool], seconds: float = 60.0) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.05)


def test_kill_9_between_cause_and_delivery_loses_nothing(webhook_server: ServerProcess) -> None:
    server = webhook_server
    receiver = Receiver(down=True).start()
    try:
        receiver.public_key = httpx.get(server.url + "/v1/webhooks/key").json()["public_key"]
        market, card = market_card()
        post(server, "/v1/log/entries", card)
        agents = []
        for i in range(2):
            key, card = agent_card(f"agent {i}")
            post(server, "/v1/log/entries", card)
            agents.append(key.id)
        post(server, "/v1/subscriptions", subscription(market, receiver.url, ["event.negative"]))
        expected: dict[str, list[int]] = {a: [] for a in agents}

        def burst(n: int) -> None:
            for _ in range(n):
                for a in agents:
                    expected[a].append(post(server, "/v1/events", negative_event(market, a)))

        burst(5)  # acknowledged: in the log; their events are derived, or not yet, when the kill comes
        server.kill9()
        server.start()
        receiver.down = False
        wait(lambda: len(receiver.accepted) == 10)
        assert receiver.repeats == 0  # nothing had been received before the kill

        burst(10)  # and a kill while deliveries are in flight
        server.kill9()
        server.start()
        wait(lambda: len(receiver.accepted) == 30)
        time.sleep(0.5)
        assert receiver.bad == []
        assert receiver.per_agent() == expected  # every event, first receipts in log order per agent
    finally:
        receiver.stop()


def test_cli_subscribes_shows_deliveries_and_unsubscribes(
    webhook_server: ServerProcess, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    server = webhook_server
    receiver = Receiver().start()
    try:
        receiver.public_key = httpx.get(server.url + "/v1/webhooks/key").json()["public_key"]
        market, card = market_card()
        post(server, "/v1/log/entries", card)
        agent, card = agent_card()
        post(server, "/v1/log/entries", card)
        key_file = tmp_path / "market.key"
        keys.write_key_file(key_file, market)
        base = ["--server", server.url, "--json"]
        assert (
            main(["subscribe", receiver.url, "--key", str(key_file), "--event", "event.negative", *base]) == 0
        )
        sid = json.loads(capsys.readouterr().out)["subscription"]
        post(server, "/v1/events", negative_event(market, agent.id))
        wait(lambda: len(receiver.accepted) == 1)

        def delivered() -> bool:
            assert main(["subscription", "deliveries", str(sid), *base]) == 0
            return bool(json.loads(capsys.readouterr().out)["delivered"] == 1)

        wait(delivered)
        assert main(["unsubscribe", str(sid), "--key", str(key_file), *base]) == 0
        assert json.loads(capsys.readouterr().out)["subscription"] == sid
        # a loopback URL with a server that does not allow it, and a malformed URL: one line, exit 1
        assert (
            main(
                ["subscribe", "ftp://x.example/", "--key", str(key_file), "--event", "event.negative", *base]
            )
            == 1
        )
        err = capsys.readouterr().err
        assert err.startswith("trustscore: error:") and len(err.strip().splitlines()) == 1
    finally:
        receiver.stop()
