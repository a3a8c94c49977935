"""The evidence ladder over HTTP (issue #13): work records in, rungs in the rating, stats with n."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import msgspec
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from tests.helpers import new_card
from trustscore.api.app import create_app
from trustscore.kinds.approvals import make_approval
from trustscore.kinds.events import EventName, make_event
from trustscore.kinds.parties import make_party_card
from trustscore.kinds.work_records import Confirmation, Run, make_work_record
from trustscore.ledger import dsse, keys
from trustscore.services import logkey
from trustscore.settings import Settings

Client = AsyncTestClient[Litestar]
T = "2026-11-29T00:00:00Z"


def body(env: Any) -> bytes:
    return msgspec.json.encode(env)


async def created(client: Client, path: str, env: Any) -> None:
    r = await client.post(path, content=body(env))
    assert r.status_code == 201, r.text


async def problem(client: Client, r: Any, status: int, words: str) -> None:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert words in r.json()["detail"], r.json()


async def test_rungs_in_the_rating_and_stats_per_marketplace(client: Client, settings: Settings) -> None:
    agent, card = new_card("coder")
    await created(client, "/v1/log/entries", card)
    market, ci = keys.SigningKey.generate(), keys.SigningKey.generate()
    await created(
        client, "/v1/log/entries", dsse.sign(make_party_card(market.public_key, "m", "marketplace"), [market])
    )
    await created(client, "/v1/log/entries", dsse.sign(make_party_card(ci.public_key, "ci", "ci"), [ci]))
    log_key = logkey.load_or_create(settings.log_key_file)
    approval = make_approval(operator=log_key.id, marketplace=market.id, action="approve")
    await created(client, "/v1/log/entries", dsse.sign(approval, [log_key]))

    def event(name: EventName, ref: str) -> dsse.Envelope:
        return dsse.sign(
            make_event(marketplace=market.id, agent=agent.id, event=name, ref=ref, occurred_at=T), [market]
        )

    await created(client, "/v1/events", event("delivered", "o1"))
    await created(client, "/v1/events", event("rejected", "o2"))
    confirmed = Confirmation(kind="ci", ref="https://ci.example/7", status="success")
    ci_record = make_work_record(
        reporter=ci.id,
        agent=agent.id,
        task_ref="T-9",
        claimed_outcome="done",
        finished_at=T,
        confirmations=[confirmed],
    )
    await created(client, "/v1/work-records", dsse.sign(ci_record, [ci]))
    mine = make_work_record(
        reporter=agent.id, agent=agent.id, task_ref="T-9", claimed_outcome="done", finished_at=T
    )
    await created(client, "/v1/work-records", dsse.sign(mine, [agent]))

    # A stranger cannot self-attest for the agent; a work record is not a generic log entry.
    stranger = keys.SigningKey.generate()
    await created(
        client, "/v1/log/entries", dsse.sign(make_party_card(stranger.public_key, "s", "ci"), [stranger])
    )
    forged = make_work_record(
        reporter=stranger.id,
        agent=agent.id,
        task_ref="T-1",
        claimed_outcome="done",
        finished_at=T,
        attestation="self",
    )
    r = await client.post("/v1/work-records", content=body(dsse.sign(forged, [stranger])))
    await problem(client, r, 400, "own controller")
    r = await client.post("/v1/log/entries", content=body(dsse.sign(mine, [agent])))
    await problem(client, r, 422, "POST /v1/work-records")

    for _ in range(200):
        rating = (await client.get(f"/v1/agents/{agent.id}/rating")).json()
        ladder = rating["dimensions"]["delivery"]["ladder"]
        if ladder is not None and ladder["n"] >= 3:
            break
        await asyncio.sleep(0.05)
    # delivered (5), rejected (0) and the CI-confirmed record (5); the agent's own weaker record of the
    # same task is not kept beside it.
    assert ladder["n"] == 3 and ladder["verified"] == 2 and ladder["rate"] == 2 / 3
    assert ladder["rungs"]["ci_or_deployment_verified"] == 2 and ladder["rungs"]["unflown"] == 1
    assert rating["dimensions"]["capability"]["ladder"] is None
    evidence = (await client.get(f"/v1/agents/{agent.id}/evidence")).json()["items"]
    by_key = {e["key"]: (e["rung"], e["rung_rule"]) for e in evidence}
    assert by_key[f"event:{market.id}:o1:delivery"] == (5, "ladder-rule@2")
    assert by_key[f"event:{market.id}:o2:delivery"] == (0, "ladder-rule@2")
    assert by_key[f"work:{ci.id}:T-9"] == (5, "ladder-rule@2")

    r = await client.get("/v1/stats/outcomes", params={"group_by": "marketplace", "floor": 2})
    assert r.status_code == 200, r.text
    [group] = r.json()["groups"]
    assert group["group"] == market.id and group["stats"]["n"] == 2 and group["stats"]["rate"] == 0.5
    r = await client.get("/v1/stats/outcomes", params={"group_by": "marketplace"})
    assert r.json()["groups"][0]["stats"] == {
        "n": 2, "verified": None, "rate": None, "reason": "below_floor", "rungs": None, "confirmed": None
    }  # fmt: skip
    bad: list[dict[str, str | int]] = [{"group_by": "colour"}, {"group_by": "model", "floor": 0}, {}]
    for params in bad:
        r = await client.get("/v1/stats/outcomes", params=params)
        assert r.status_code == 400 and r.headers["content-type"].startswith("application/problem+json")


async def test_rows_are_append_only_and_entries_from_before_the_ladder_are_backfilled(
    settings: Settings, dsn: str
) -> None:
    agent, card = new_card("old-timer")
    async with AsyncTestClient(app=create_app(settings, dsn)) as client:
        await created(client, "/v1/log/entries", card)
        for i in range(3):
            record = make_work_record(
                reporter=agent.id, agent=agent.id, task_ref=f"T-{i}", claimed_outcome="done", finished_at=T,
                model="m", runs=[Run(kind="test", command="pytest", exit_code=i)],
            )  # fmt: skip
            await created(client, "/v1/work-records", dsse.sign(record, [agent]))
        for _ in range(200):
            before = (await client.get("/v1/stats/outcomes", params={"group_by": "model", "floor": 1})).json()
            if before["groups"] and before["groups"][0]["stats"]["n"] == 3:
                break
            await asyncio.sleep(0.05)
        assert before["groups"][0]["stats"]["verified"] == 1
    conn = await asyncpg.connect(dsn)
    try:
        with pytest.raises(asyncpg.InsufficientPrivilegeError, match="append-only"):
            await conn.execute("UPDATE ladder SET rule = 'ladder-rule@0'")
        # An entry log projected before migration 0013 had no ladder rows: make this one look like it.
        await conn.execute(
            "ALTER TABLE ladder DISABLE TRIGGER USER; DELETE FROM ladder; ALTER TABLE ladder ENABLE TRIGGER USER"
        )
        await conn.execute(
            "UPDATE projection_state SET next_index = (SELECT next_index FROM projection_state WHERE name = 'log') "
            "WHERE name = 'ladder_backfill'"
        )
    finally:
        await conn.close()
    async with AsyncTestClient(app=create_app(settings, dsn)) as client:
        after = (await client.get("/v1/stats/outcomes", params={"group_by": "model", "floor": 1})).json()
        assert after == before


async def test_stats_groups_come_a_page_at_a_time(client: Client) -> None:
    """Models are free text: every group ever named was in each answer. Now at most ``limit`` (1000)
    groups in name order, ``next`` naming where the next page starts."""
    agent, card = new_card("coder")
    await created(client, "/v1/log/entries", card)
    models = ["model-a", "model-b", "model-c"]
    for i, model in enumerate(models):
        record = make_work_record(
            reporter=agent.id, agent=agent.id, task_ref=f"T-{i}", claimed_outcome="done", finished_at=T,
            model=model,
        )  # fmt: skip
        await created(client, "/v1/work-records", dsse.sign(record, [agent]))
    params: dict[str, str | int] = {"group_by": "model", "floor": 1}
    for _ in range(200):  # until the projector has the three rows
        whole = (await client.get("/v1/stats/outcomes", params=params)).json()
        if len(whole["groups"]) == 3:
            break
        await asyncio.sleep(0.05)
    assert [g["group"] for g in whole["groups"]] == models and whole["next"] is None
    first = (await client.get("/v1/stats/outcomes", params={**params, "limit": 2})).json()
    assert [g["group"] for g in first["groups"]] == models[:2] and first["next"] == "model-b"
    rest = (await client.get("/v1/stats/outcomes", params={**params, "after": first["next"]})).json()
    assert rest["groups"] == whole["groups"][2:] and rest["next"] is None
    for bad in ({"limit": 0}, {"limit": 1001}, {"after": "x" * 2049}):
        r = await client.get("/v1/stats/outcomes", params={**params, **bad})
        assert r.status_code == 400 and r.headers["content-type"].startswith("application/problem+json")


async def test_a_duplicate_work_record_costs_nothing(settings: Settings, dsn: str) -> None:
    """POST /v1/work-records writes log entries charged per new entry by the services, like every entry
    route (api/addresses.py): a duplicate costs nothing and a new record one entry, not one more per
    POST (the route was missing from ENTRY_ROUTES, so the before-request hook charged it as any write)."""
    from dataclasses import replace

    limited = replace(settings, address_rate_per_minute=3)  # a burst of 3
    async with AsyncTestClient(app=create_app(limited, dsn)) as c:
        agent, card = new_card("coder")
        await created(c, "/v1/log/entries", card)
        mine = make_work_record(
            reporter=agent.id, agent=agent.id, task_ref="T-1", claimed_outcome="done", finished_at=T
        )
        record = body(dsse.sign(mine, [agent]))
        codes = [(await c.post("/v1/work-records", content=record)).status_code for _ in range(6)]
    assert codes == [201, 200, 200, 200, 200, 200]
