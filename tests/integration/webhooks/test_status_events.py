"""The two status events of #15 end to end, each through a real server's own work and a real receiver:
``verified.changed`` as the re-verifier logs runs against a real example agent that is up, then down;
``scope.status_changed`` as the server's scope run against a dead endpoint turns the agent critical.
Every delivery verifies with the published key, and the event ids are those the log determines."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import replace

import msgspec
import pytest
from litestar.testing import AsyncTestClient

from tests.integration.api.test_scope_runs import register
from tests.integration.service.conftest import free_port
from tests.integration.webhooks.parties import market_card, subscription
from tests.integration.webhooks.receiver import Receiver
from tests.integration.webhooks.test_webhooks_api import FAST, Client, post, until
from trustscore.api.app import create_app
from trustscore.cli.agent import card_envelope
from trustscore.devserver import AgentProcess
from trustscore.exams.loader import DEFAULT_PUBLIC_DIR, ExamDirs, load_exam
from trustscore.ledger import keys
from trustscore.sdk import agent_from_spec, run_exam
from trustscore.sdk.runner import sign_run
from trustscore.settings import Settings
from trustscore.webhooks.events import event_id

AGENTS = DEFAULT_PUBLIC_DIR.parent / "examples" / "agents"


@pytest.fixture
async def sclient(settings: Settings, dsn: str, receiver: Receiver) -> AsyncIterator[Client]:
    """A server that may reach loopback (the receiver and the agents) and re-verifies every second."""
    fast = replace(
        settings, outbound_allow_loopback=True, reverify_interval=1.0, reverify_deadline=4.0, **FAST
    )
    async with AsyncTestClient(app=create_app(fast, dsn)) as c:
        receiver.public_key = (await c.get("/v1/webhooks/key")).json()["public_key"]
        yield c


def of(receiver: Receiver, type_: str) -> list[dict[str, object]]:
    return [receiver.accepted[i].body for i in receiver.order if receiver.accepted[i].type == type_]


async def test_verified_is_announced_when_gained_and_when_lost(sclient: Client, receiver: Receiver) -> None:
    market, card = market_card()
    await post(sclient, "/v1/log/entries", card)
    agent = AgentProcess("good", free_port()).start()
    try:
        key = keys.SigningKey.generate()
        await post(
            sclient, "/v1/subscriptions", subscription(market, receiver.url, ["verified.changed"], [key.id])
        )
        env = card_envelope(key, "good", endpoint=agent.endpoint)
        await post(sclient, "/v1/log/entries", msgspec.json.encode(env))
        run = run_exam(
            load_exam("integrity@1", ExamDirs()), agent_from_spec(f"python:{AGENTS / 'scripted.py'}:good")
        )
        await post(sclient, "/v1/reports", msgspec.json.encode(sign_run(run, key)))
        await until(lambda: len(of(receiver, "verified.changed")) >= 1, 120)
        [gained] = of(receiver, "verified.changed")
        data = gained["data"]
        assert isinstance(data, dict)
        assert data["agent"] == key.id and data["verified"] is True and data["change"] == "gained"
        assert data["outcome"] == "match" and data["previous_reason"] is None
        assert data["id"] == event_id(int(data["log_index"]), "verified.changed", key.id)
        rating = (await sclient.get(f"/v1/agents/{key.id}/rating")).json()
        assert rating["verification"]["history"][0]["index"] == data["log_index"]
    finally:
        agent.stop()  # the endpoint goes down: the next scheduled run finds it unreachable
    await until(lambda: len(of(receiver, "verified.changed")) >= 2, 120)
    lost = of(receiver, "verified.changed")[1]["data"]
    assert isinstance(lost, dict)
    assert lost["verified"] is False and lost["change"] == "lost" and lost["reason"] == "mismatch"
    assert lost["outcome"] == "unreachable"
    assert receiver.bad == [] and receiver.repeats == 0


async def test_a_scope_run_that_turns_the_agent_critical_is_announced(
    sclient: Client, receiver: Receiver
) -> None:
    market, card = market_card()
    await post(sclient, "/v1/log/entries", card)
    key = keys.SigningKey.generate()
    await post(
        sclient, "/v1/subscriptions", subscription(market, receiver.url, ["scope.status_changed"], [key.id])
    )
    await register(sclient, f"http://127.0.0.1:{free_port()}/gone", key=key)  # the server's run fails all
    await until(lambda: len(of(receiver, "scope.status_changed")) == 1, 120)
    [changed] = of(receiver, "scope.status_changed")
    data = changed["data"]
    assert isinstance(data, dict)
    view = (await sclient.get(f"/v1/agents/{key.id}/scope-honesty")).json()
    [run] = view["runs"]
    assert (data["from"], data["to"]) == ("ok", view["status"]) == ("ok", "suspended")  # SHS < 60 once
    assert data["log_index"] == run["close_index"] and data["reasons"] == view["status_reasons"]
    assert data["scores_hundredths"] == {
        "ba": round(run["ba"] * 100),
        "da": round(run["da"] * 100),
        "ft": round(run["ft"] * 100),
        "shs": round(run["shs"] * 100),
    }
    assert changed["type"] == "scope.status_changed" and receiver.bad == []
