"""Evidence in over HTTP: bad reports, settlements and events are refused with a clear error and write
nothing; events count; rate limits answer 429; readiness and metrics are served."""

from __future__ import annotations

import asyncio
import json
from dataclasses import replace
from typing import Any

import msgspec
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient
from openapi_spec_validator import validate

from tests.helpers import new_card
from trustscore import canonical
from trustscore.api.app import create_app
from trustscore.exams.loader import DEFAULT_PUBLIC_DIR, ExamDirs, load_exam
from trustscore.kinds.approvals import make_approval
from trustscore.kinds.events import EventName, make_event
from trustscore.kinds.exam_report import EXAM_REPORT, ExamReport, ReportItem, report_subject
from trustscore.kinds.parties import make_party_card
from trustscore.ledger import dsse, keys, statements
from trustscore.sdk import agent_from_spec, run_exam
from trustscore.sdk.runner import sign_run
from trustscore.services import logkey
from trustscore.settings import Settings

Client = AsyncTestClient[Litestar]
AGENTS = DEFAULT_PUBLIC_DIR.parent / "examples" / "agents" / "scripted.py"


def body(env: Any) -> bytes:
    return msgspec.json.encode(env)


async def size(client: Client) -> int:
    return len((await client.get("/v1/log/entries", params={"start": 0})).json()["entries"])


async def refused(client: Client, path: str, env: Any, status: int, words: str) -> None:
    before = await size(client)
    r = await client.post(path, content=body(env))
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert words in r.json()["detail"], r.json()
    assert await size(client) == before


@pytest.fixture(scope="module")
def integrity_run() -> Any:
    exam = load_exam("integrity@1", ExamDirs())
    return run_exam(exam, agent_from_spec(f"python:{AGENTS}:good"))


def resign(envelope: dsse.Envelope, key: keys.SigningKey, **changes: Any) -> dsse.Envelope:
    report = statements.parse_statement(canonical.b64decode(envelope.payload)).predicate
    assert isinstance(report, ExamReport)
    raw = json.loads(canonical.b64decode(envelope.payload))
    raw["predicate"].update(changes)
    return dsse.sign(json.dumps(raw).encode(), [key])


async def test_reports_are_regraded_and_bad_ones_refused(client: Client, integrity_run: Any) -> None:
    key, card = new_card("examinee")
    stranger = keys.SigningKey.generate()
    envelope = sign_run(integrity_run, key)
    # The agent must be registered first.
    await refused(client, "/v1/reports", envelope, 422, "no registered key")
    await client.post("/v1/log/entries", content=body(card))
    # A report of another kind, an array, an unknown exam version, a digest mismatch, an unknown item.
    await refused(client, "/v1/reports", card, 422, "agent-card statements are not accepted here")
    await refused(client, "/v1/reports", [envelope], 400, "one envelope")
    await refused(client, "/v1/reports", resign(envelope, key, exam_version=9), 404, "integrity@9")
    await refused(
        client, "/v1/reports", resign(envelope, key, exam_digest="sha256:" + "0" * 64), 422, "digest"
    )
    exam = load_exam("integrity@1", ExamDirs())
    report = statements.parse_statement(canonical.b64decode(envelope.payload)).predicate
    assert isinstance(report, ExamReport)
    extra = [*report.items, ReportItem("no-such-item", [], None, 0, "failure")]
    bad = dsse.sign(
        statements.make_statement(
            EXAM_REPORT,
            report_subject(key.id, extra),
            msgspec.structs.replace(report, items=extra, nonce="n" * 32),
        ),
        [key],
    )
    await refused(client, "/v1/reports", bad, 400, "no-such-item")
    # A report signed by a key other than its agent's.
    await refused(
        client, "/v1/reports", dsse.sign(canonical.b64decode(envelope.payload), [stranger]), 422, ""
    )
    # The real one is re-graded by the server and logged with the server's graded evidence.
    r = await client.post("/v1/reports", content=body(envelope))
    assert r.status_code == 201, r.text
    graded = r.json()
    assert graded["evidence_index"] == graded["report_index"] + 1
    assert len(graded["items"]) == len(exam.items)
    again = await client.post("/v1/reports", content=body(envelope))  # a report is its answers: a duplicate
    assert again.status_code == 200 and again.json()["report_index"] == graded["report_index"]


async def test_events_count_and_need_a_marketplace(client: Client, settings: Settings) -> None:
    agent, card = new_card("seller")
    await client.post("/v1/log/entries", content=body(card))
    market = keys.SigningKey.generate()
    fake = keys.SigningKey.generate()
    await client.post(
        "/v1/log/entries",
        content=body(dsse.sign(make_party_card(market.public_key, "market", "marketplace"), [market])),
    )
    # Only the operator (the log key) may approve a marketplace; then its events count in full.
    approval = make_approval(operator=market.id, marketplace=market.id, action="approve")
    await refused(client, "/v1/log/entries", dsse.sign(approval, [market]), 422, "log key")
    log_key = logkey.load_or_create(settings.log_key_file)
    approval = make_approval(operator=log_key.id, marketplace=market.id, action="approve")
    r = await client.post("/v1/log/entries", content=body(dsse.sign(approval, [log_key])))
    assert r.status_code == 201, r.text
    await client.post(
        "/v1/log/entries",
        content=body(dsse.sign(make_party_card(fake.public_key, "not a market", "counterparty"), [fake])),
    )

    def event(signer: keys.SigningKey, name: EventName, ref: str) -> dsse.Envelope:
        return dsse.sign(
            make_event(
                marketplace=signer.id, agent=agent.id, event=name, ref=ref, occurred_at="2026-11-29T00:00:00Z"
            ),
            [signer],
        )

    await refused(client, "/v1/events", event(fake, "delivered", "o1"), 400, "not marketplace")
    r = await client.post("/v1/events", content=body(event(market, "delivered", "o1")))
    assert r.status_code == 201, r.text
    r = await client.post("/v1/events", content=body(event(market, "signature_invalid", "o2")))
    assert r.status_code == 201, r.text
    for _ in range(200):
        rating = (await client.get(f"/v1/agents/{agent.id}/rating", params={"model": "baseline-v0.3"})).json()
        if rating.get("n") == 2:
            break
        await asyncio.sleep(0.05)
    assert rating["dimensions"]["delivery"]["score"] == 100.0
    assert rating["dimensions"]["integrity"]["score"] == 0.0
    evidence = (await client.get(f"/v1/agents/{agent.id}/evidence")).json()["items"]
    assert {e["issuer"] for e in evidence} == {market.id}
    assert all(e["index"] >= 0 for e in evidence)


async def test_unknown_agent_and_unrated_agent(client: Client) -> None:
    r = await client.get("/v1/agents/ts1_" + "0" * 40 + "/rating")
    assert r.status_code == 404
    agent, card = new_card("newcomer")
    await client.post("/v1/log/entries", content=body(card))
    for _ in range(200):
        r = await client.get(f"/v1/agents/{agent.id}/rating")
        if r.status_code == 200:
            break
        await asyncio.sleep(0.05)
    rating = r.json()
    assert r.headers["content-type"] == "application/json"
    assert r.headers["cache-control"] == "max-age=5, public"
    assert rating["total"] is None and rating["null_reasons"]["total"] == "no_scored_dimensions"
    r = await client.get(f"/v1/agents/{agent.id}/rating", params={"model": "no-such-model"})
    assert r.status_code == 404 and r.headers["content-type"].startswith("application/problem+json")
    assert "no-such-model" in r.json()["detail"]
    assert all(
        d["score"] is None and d["null_reason"] == "no_evidence" for d in rating["dimensions"].values()
    )
    board = (await client.get("/v1/leaderboard")).json()
    assert agent.id not in [r["agent"] for r in board["ranked"]]
    r = await client.get("/v1/leaderboard", params={"dimension": "charisma"})
    assert r.status_code == 400


async def test_rating_route_described_in_openapi(client: Client) -> None:
    """The rating route reads its parameters by hand (it is the hottest read), so its OpenAPI
    description is written by hand too: it must still name both parameters and the response schema."""
    op = (await client.get("/schema/openapi.json")).json()["paths"]["/v1/agents/{agent_id}/rating"]["get"]
    assert {(p["name"], p["in"], p["required"]) for p in op["parameters"]} == {
        ("agent_id", "path", True),
        ("model", "query", False),
    }
    assert op["responses"]["200"]["content"]["application/json"]["schema"]["$ref"].endswith("RatingOut")


async def test_openapi_document_is_valid_and_describes_bodies_and_problems(client: Client) -> None:
    """The write routes read raw bodies (signatures are checked over the bytes received) and errors
    leave through the problem handlers, so both are described by hand: the document must still be
    valid OpenAPI 3.1, give every write route an envelope body and name its problem responses."""
    schema = (await client.get("/schema/openapi.json")).json()
    validate(schema)
    writes = {
        path: op["post"]
        for path, op in schema["paths"].items()
        if "post" in op
        and path.startswith("/v1/")
        and not path.endswith("/dialogue")  # a JSON move, not signed
    }
    assert set(writes) == {
        "/v1/log/entries", "/v1/reports", "/v1/settlements", "/v1/events", "/v1/sittings",
        "/v1/sittings/{index}/report", "/v1/work-records", "/v1/subscriptions",
    }  # fmt: skip
    for path, op in writes.items():
        body_schema = op["requestBody"]["content"]["application/json"]["schema"]
        envelope = body_schema["oneOf"][0] if path == "/v1/log/entries" else body_schema
        assert envelope["required"] == ["payloadType", "payload", "signatures"], path
        assert {"400", "409", "413", "422", "429"} <= op["responses"].keys(), path
        problem = op["responses"]["409"]["content"]["application/problem+json"]["schema"]
        assert problem["$ref"].endswith("/Problem")
    assert (
        schema["paths"]["/v1/log/entries"]["post"]["requestBody"]["content"]["application/json"]["schema"][
            "oneOf"
        ][1]["maxItems"]
        == 1000
    )
    rating = schema["paths"]["/v1/agents/{agent_id}/rating"]["get"]["responses"]
    assert {"200", "404"} <= rating.keys()


async def test_ops_routes(client: Client) -> None:
    ready = await client.get("/readyz")
    assert ready.status_code == 200 and ready.text.splitlines()[1].startswith("sandbox: kernel (user, PID")
    _, card = new_card("metered")
    await client.post("/v1/log/entries", content=body(card))
    metrics = (await client.get("/metrics")).text
    assert "trustscore_ingest_seconds_bucket" in metrics and "trustscore_entries_appended_total" in metrics
    methodology = (await client.get("/v1/methodology")).json()
    assert {m["model_version"] for m in methodology["models"]} == {"trustscore-v2", "baseline-v0.3"}
    assert "round_half_up" in methodology["document"] or "half" in methodology["document"]
    assert methodology["sandbox"]["mode"] == "kernel" and "seccomp" in methodology["sandbox"]["mechanisms"]
    exams = (await client.get("/v1/exams")).json()
    assert {"capability@1", "security@1"} <= {e["id"] for e in exams}


async def test_rate_limits_answer_429(settings: Settings, dsn: str) -> None:
    limited = replace(settings, key_rate=1.0, key_burst=2, address_rate_per_minute=5)
    async with AsyncTestClient(app=create_app(limited, dsn)) as c:
        key = keys.SigningKey.generate()
        from trustscore.cli.agent import card_envelope

        responses = [
            await c.post("/v1/log/entries", content=body(card_envelope(key, f"n{i}"))) for i in range(4)
        ]
        codes = [r.status_code for r in responses]
        assert codes[:2] == [201, 201] and codes[2] == 429
        assert responses[2].headers["retry-after"] == "1" and responses[2].json()["retry_after"] == 1
        codes = [(await c.post("/v1/log/entries", content=b"{}")).status_code for _ in range(6)]
        assert 429 in codes
        r = await c.post("/v1/log/entries", content=b"{}")
        assert r.status_code == 429 and r.headers["content-type"].startswith("application/problem+json")
        assert int(r.headers["retry-after"]) >= 1


@pytest.mark.parametrize(("root_path", "path"), [("", "/v1/log/entries/"), ("/api", "/api/v1/log/entries")])
async def test_a_duplicate_costs_nothing_behind_a_root_path_or_with_a_trailing_slash(
    settings: Settings, dsn: str, root_path: str, path: str
) -> None:
    """POST /v1/log/entries is charged per new entry (a duplicate costs nothing) however its path is
    spelled. Behind a proxy's root path (uvicorn --root-path puts it in front of scope["path"], which
    Litestar's router then strips) or with a trailing slash, the before-request hook compared the URL
    path to the entry routes, missed, and charged one token per POST as for any other write."""
    from trustscore.cli.agent import card_envelope

    limited = replace(settings, address_rate_per_minute=3)  # a burst of 3
    async with AsyncTestClient(app=create_app(limited, dsn), root_path=root_path) as c:
        card = body(card_envelope(keys.SigningKey.generate(), "n0"))
        codes = [(await c.post(path, content=card)).status_code for _ in range(6)]
    assert codes == [201, 200, 200, 200, 200, 200]
