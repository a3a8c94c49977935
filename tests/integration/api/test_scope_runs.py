"""Server scope runs (issue #12, "Schedule and escalation"): the server sits ``scope@1`` against the
declared endpoint of a real local HTTP agent (the rule-based example agent), after a declaration change
and on schedule, and logs a verifiable ``scope-run/v1``; the offline view equals the API's; a loopback
endpoint is refused unless the operator allows it; a down endpoint is failure evidence, not a crash; two
runners never run one (agent, week) twice.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import asyncpg
import msgspec
import pytest
from examples.agents import scope_agent
from litestar import Litestar
from litestar.testing import AsyncTestClient

from tests.helpers import new_card
from tests.integration.service.conftest import free_port
from trustscore import canonical
from trustscore.api.app import create_app
from trustscore.cli.agent import card_envelope
from trustscore.exams.loader import ExamDirs
from trustscore.exams.scope_items import check_items
from trustscore.kinds.cards import CapabilityDeclaration
from trustscore.kinds.scope_run import ScopeRun
from trustscore.ledger import audit, keys
from trustscore.outbound.guard import OutboundPolicy
from trustscore.scope.report import from_leaves
from trustscore.services.log import LogService
from trustscore.services.scope_runs import ScopeRunConfig, ScopeRunner
from trustscore.settings import Settings
from trustscore.store import db
from trustscore.store.log import LogStore
from trustscore.store.scope import ScopeStore

Client = AsyncTestClient[Litestar]
DECLARATIONS = json.loads(Path("examples/agents/scope_declarations.json").read_text())


@pytest.fixture
def agent_url() -> Iterator[str]:
    server, url = scope_agent.serve()
    yield url
    server.shutdown()
    server.server_close()


def settings_for(tmp_path: Path, **kw: Any) -> Settings:
    """Card changes run at once however often they come (the once-a-period limit has its own test)."""
    return Settings(
        data_dir=tmp_path / "data", integrate_interval=0.05, **{"sitting_scope_interval": 0.0, **kw}
    )


@pytest.fixture
async def loopback_client(tmp_path: Path, dsn: str) -> AsyncIterator[Client]:
    async with AsyncTestClient(
        app=create_app(settings_for(tmp_path, outbound_allow_loopback=True), dsn)
    ) as c:
        yield c


async def register(
    client: Client, endpoint: str | None, key: keys.SigningKey | None = None, model_version: str = "rules-1"
) -> keys.SigningKey:
    """Log a v2 card declaring the example agent's capabilities (a new key unless ``key``)."""
    key = key or keys.SigningKey.generate()
    env = card_envelope(
        key,
        "scoped",
        endpoint=endpoint,
        model_version=model_version,
        declarations=[msgspec.convert(d, CapabilityDeclaration) for d in DECLARATIONS["declarations"]],
        non_capabilities=DECLARATIONS["non_capabilities"],
    )
    r = await client.post("/v1/log/entries", content=msgspec.json.encode(env))
    assert r.status_code == 201, r.text
    return key


async def view(client: Client, agent: str) -> dict[str, Any]:
    r = await client.get(f"/v1/agents/{agent}/scope-honesty")
    assert r.status_code == 200, r.text
    return dict(r.json())


async def server_runs(client: Client, agent: str, count: int) -> dict[str, Any]:
    for _ in range(1200):
        r = await client.get(f"/v1/agents/{agent}/scope-honesty")
        if r.status_code == 200 and sum(run["server_initiated"] for run in r.json()["runs"]) >= count:
            return dict(r.json())
        await asyncio.sleep(0.1)
    raise AssertionError(f"no {count} server scope runs of {agent}: {r.text[:2000]}")


async def export(client: Client) -> list[tuple[int, bytes]]:
    out: list[tuple[int, bytes]] = []
    start = 0
    while True:
        page = (await client.get("/v1/log/entries", params={"start": start})).json()
        out += [(e["index"], canonical.b64decode(e["leaf"])) for e in page["entries"]]
        if not page.get("next"):
            return out
        start = page["next"]


def scope_runs_in(leaves: list[tuple[int, bytes]], agent: str) -> list[tuple[int, ScopeRun]]:
    out = []
    for index, leaf in leaves:
        p = audit.parse_leaf(leaf).statement.predicate
        if isinstance(p, ScopeRun) and p.agent == agent:
            out.append((index, p))
    return out


async def rows(dsn: str, agent: str) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(dsn)
    try:
        return list(await conn.fetch("SELECT * FROM scope_runs WHERE agent = $1 ORDER BY created_at", agent))
    finally:
        await conn.close()


async def test_a_declaration_change_triggers_a_logged_verifiable_server_run(
    loopback_client: Client, agent_url: str, tmp_path: Path
) -> None:
    client = loopback_client
    key = await register(client, agent_url)
    v = await server_runs(client, key.id, 1)
    [run] = v["runs"]
    assert run["server_initiated"] and run["trigger"] == "declarations" and run["outcome"] == "server"
    assert run["current"] and run["open_index"] == run["close_index"]
    assert (v["shs"], v["tier"], v["status"], v["evaluation_due"]) == (100.0, "Certified", "ok", False)
    assert v["rts"]["value"] == 100.0 and v["server_runs"] == {"scheduled": True, "reason": None}

    leaves = await export(client)
    [(index, stmt)] = scope_runs_in(leaves, key.id)
    assert index == run["close_index"]
    reverify_key = keys.read_key_file(tmp_path / "data" / "reverify.key")
    assert stmt.verifier == reverify_key.id and stmt.endpoint == agent_url
    assert stmt.model_version == "rules-1" and stmt.card_index == v["declarations"][0]["index"]
    assert stmt.declarations_digest == v["declarations"][0]["declarations_digest"]
    items = check_items(stmt, reverify_key.public_key)  # the items are the ones the signed seed determines
    assert [i.id for i in items] == [g.item_id for g in stmt.items] == [a.item_id for a in stmt.answers]
    assert all(a.sha256 is not None for a in stmt.answers)
    forged = msgspec.structs.replace(stmt, seed_signature=canonical.b64encode(reverify_key.sign(b"other")))
    with pytest.raises(Exception, match=r"signature|determines"):
        check_items(forged, reverify_key.public_key)

    # Offline from the exported log: the same view at the API's clock.
    at = dt.datetime.strptime(v["at"], "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.UTC)
    assert msgspec.to_builtins(from_leaves(key.id, leaves, at)) == v

    # The same declarations again (a new card, nothing changed): no new run.
    await register(client, agent_url, key=key)
    # A new declared model version: a new run, for the new card.
    await register(client, agent_url, key=key, model_version="rules-2")
    v = await server_runs(client, key.id, 2)
    assert len(v["runs"]) == 2 and v["runs"][1]["current"] and not v["runs"][0]["current"]
    assert v["declarations"][-1]["changed"] == ["model_version"]


async def test_changing_the_card_buys_one_server_draw_a_period(
    tmp_path: Path, dsn: str, agent_url: str
) -> None:
    """Each card with another declared model version triggered a server run, a fresh draw, and the view
    shows the latest: a review got 6 server runs in 14.6 s in one week, so an agent with an endpoint
    could change its card until a draw went well. Now one card-triggered run per agent per period."""
    settings = settings_for(tmp_path, outbound_allow_loopback=True, sitting_scope_interval=604_800.0)
    async with AsyncTestClient(app=create_app(settings, dsn)) as client:
        key = await register(client, agent_url)
        v = await server_runs(client, key.id, 1)
        await register(client, agent_url, key=key, model_version="rules-2")
        for _ in range(30):  # the sweep runs every second: give it a few
            await asyncio.sleep(0.1)
        await register(client, agent_url, key=key, model_version="rules-3")
        await asyncio.sleep(2.5)
        v = (await client.get(f"/v1/agents/{key.id}/scope-honesty")).json()
        assert [r["trigger"] for r in v["runs"]] == ["declarations"], v["runs"]
        assert v["shs"] is None and v["evaluation_due"]  # until the week's run
        other = await register(client, agent_url)  # another agent is not held back
        await server_runs(client, other.id, 1)


async def test_a_loopback_endpoint_is_refused_unless_the_operator_allows_it(
    client: Client, agent_url: str, dsn: str
) -> None:
    key = await register(client, agent_url)  # the default settings refuse loopback
    for _ in range(600):
        found = await rows(dsn, key.id)
        if found and found[0]["state"] != "pending":
            break
        await asyncio.sleep(0.1)
    [row] = found
    assert row["state"] == "skipped" and "refused" in row["reason"] and row["entry_index"] is None
    assert scope_runs_in(await export(client), key.id) == []
    v = await view(client, key.id)
    assert v["runs"] == [] and v["shs"] is None and v["shs_reason"] == "no scope sitting has closed yet"


async def test_agents_without_endpoint_or_declarations_are_skipped_with_a_reason(client: Client) -> None:
    key = await register(client, None)
    v = await view(client, key.id)
    assert v["server_runs"] == {
        "scheduled": False,
        "reason": "no endpoint in the agent card: the server cannot run the scope suite against it",
    }
    plain, env = new_card("plain", endpoint="https://agent.example/api")
    assert (await client.post("/v1/log/entries", content=msgspec.json.encode(env))).status_code == 201
    v = await view(client, plain.id)
    assert v["server_runs"]["scheduled"] is False and "no capabilities declared" in v["server_runs"]["reason"]
    assert v["shs"] is None and v["da"]["value"] is None  # null with a reason, never zero


async def test_a_down_endpoint_yields_failure_evidence_not_a_crash(loopback_client: Client) -> None:
    client = loopback_client
    key = await register(client, f"http://127.0.0.1:{free_port()}/gone")
    v = await server_runs(client, key.id, 1)
    [stmt] = [p for _, p in scope_runs_in(await export(client), key.id)]
    assert all(g.result == "failure" for g in stmt.items)
    assert all(a.sha256 is None and a.error for a in stmt.answers)
    assert v["da"]["value"] == 0.0 and v["ba"]["value"] == 0.0 and v["shs"] is not None and v["shs"] < 60
    assert (await client.get("/readyz")).status_code == 200  # the server carries on


class Clock:
    def __init__(self, at: dt.datetime) -> None:
        self.at = at

    def __call__(self) -> dt.datetime:
        return self.at


async def test_weekly_runs_on_an_injected_clock_never_twice_per_agent_and_week(
    loopback_client: Client, agent_url: str, dsn: str, tmp_path: Path
) -> None:
    client = loopback_client
    key = await register(client, agent_url)
    await server_runs(client, key.id, 1)  # the declarations run first
    pool = await db.create_pool(dsn, min_size=1, max_size=4)
    try:  # the runners' own log service, in this test's event loop, on the same database
        s = settings_for(tmp_path)
        log_service = LogService(
            LogStore(pool), keys.read_key_file(s.log_key_file), s.log_origin, max_batch=100
        )
        clock = Clock(dt.datetime(2031, 3, 3, 12, tzinfo=dt.UTC))
        config = ScopeRunConfig(policy=OutboundPolicy(allow_loopback=True))
        reverify_key = keys.read_key_file(tmp_path / "data" / "reverify.key")
        runners = [
            ScopeRunner(log_service, ScopeStore(pool), reverify_key, ExamDirs(), config, clock)
            for _ in (1, 2)
        ]  # two processes on one database
        assert await runners[0].schedule_weekly() == 1
        assert await runners[1].schedule_weekly() == 0  # the same (agent, week): already scheduled
        week = f"week:{runners[0].period()}"
        stop = asyncio.Event()
        await asyncio.gather(*(r.step(stop) for r in runners))
        v = await server_runs(client, key.id, 2)
        assert v["runs"][-1]["trigger"] == "schedule"
        clock.at += dt.timedelta(days=3)  # the same week: nothing new
        assert [await r.schedule_weekly() for r in runners] == [0, 0]
        clock.at += dt.timedelta(days=7)  # the next week: one more run
        assert await runners[1].schedule_weekly() == 1
        await runners[0].step(stop)
        v = await server_runs(client, key.id, 3)
        keyed = [p.run_key for _, p in scope_runs_in(await export(client), key.id)]
        assert keyed.count(week) == 1 and keyed[-1] == f"week:{runners[0].period()}" and len(keyed) == 3
        # A restart re-schedules nothing already run (the row's key) and a replayed run logs nothing new.
        again = ScopeRunner(log_service, ScopeStore(pool), reverify_key, ExamDirs(), config, clock)
        assert await again.schedule_weekly() == 0
        assert await again.store.schedule_run(key.id, week, "schedule", 10) is False
    finally:
        await pool.close()


class CountingStore(ScopeStore):
    """A ScopeStore that records which agents each sweep looked up."""

    looked_up: list[list[str] | None]

    async def newest_cards(
        self, agents: list[str] | None, before: int | None = None, count: int = 2
    ) -> dict[str, list[tuple[int, bytes]]]:
        self.looked_up.append(agents)
        return await super().newest_cards(agents, before, count)


async def marked_past(client: Client, store: ScopeStore, agent: str) -> None:
    """Wait until the app's runner has moved its marks past ``agent``'s card and scheduled this period. A
    server run seen is not enough: the run (week's or card's) may finish before the step that scheduled
    it writes its mark (seen once in CI on a loaded machine)."""
    card = (await client.get(f"/v1/agents/{agent}")).json()["card_index"]
    for _ in range(600):
        if await store.mark("scope_cards") > card and await store.mark("scope_period") != 0:
            return
        await asyncio.sleep(0.05)
    raise AssertionError(
        f"the app's runner never marked {agent}'s card at {card} swept and the period scheduled"
    )


async def test_a_restarted_runner_goes_on_from_where_the_sweep_of_cards_stopped(
    loopback_client: Client, agent_url: str, dsn: str, tmp_path: Path
) -> None:
    """A restart or a lease takeover neither sweeps every card of the log again nor reads every agent's
    newest cards to schedule a period already scheduled: the marks are in the database. The next new
    card is still swept."""
    client = loopback_client
    key = await register(client, agent_url)
    await server_runs(client, key.id, 1)  # the app's runner swept the card and ran its declarations run
    pool = await db.create_pool(dsn, min_size=1, max_size=2)
    try:
        s = settings_for(tmp_path)
        log_service = LogService(
            LogStore(pool), keys.read_key_file(s.log_key_file), s.log_origin, max_batch=100
        )
        config = ScopeRunConfig(policy=OutboundPolicy(allow_loopback=True))
        reverify_key = keys.read_key_file(tmp_path / "data" / "reverify.key")
        store = CountingStore(pool)
        await marked_past(client, store, key.id)
        store.looked_up = []
        restarted = ScopeRunner(log_service, store, reverify_key, ExamDirs(), config)
        assert await restarted.sweep_cards() == 0
        assert store.looked_up == []  # before the mark was kept, a new process looked up every agent
        assert await restarted.schedule_weekly() == 0  # the app's runner has scheduled this period
        assert store.looked_up == []  # ... and a new process no longer reads every agent's cards again
        marked = await store.mark("scope_cards")
        other = await register(client, agent_url)  # a card past the mark is still swept, and run
        await server_runs(client, other.id, 1)
        await marked_past(client, store, other.id)
        assert await store.mark("scope_cards") > marked
    finally:
        await pool.close()
