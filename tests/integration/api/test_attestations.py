"""Rating attestations on a real database: a bundle of real evidence (exam, settlements weighted by a
reporter's snapshot, marketplace events, the agent's own snapshots) verifies offline with
``trustscore rating verify``; a changed number, a flipped proof bit or a dropped entry is named."""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import httpx
import msgspec
import pytest
from litestar import Litestar
from litestar.di import Provide
from litestar.testing import AsyncTestClient

from tests.helpers import new_card
from trustscore import canonical
from trustscore.api.attestation_routes import AttestationController
from trustscore.api.problems import EXCEPTION_HANDLERS
from trustscore.api.wiring import services_of
from trustscore.attestations import rating as attestation
from trustscore.cli import rating as rating_cli
from trustscore.errors import TrustscoreError
from trustscore.exams.loader import DEFAULT_PUBLIC_DIR, ExamDirs, load_exam
from trustscore.kinds.approvals import make_approval
from trustscore.kinds.events import EventName, make_event
from trustscore.kinds.parties import make_party_card
from trustscore.kinds.settlements import make_settlement
from trustscore.ledger import dsse, keys, note
from trustscore.sdk import agent_from_spec, run_exam
from trustscore.sdk.runner import sign_run
from trustscore.services import logkey, snapshots
from trustscore.services.attestations import AttestationService, build_bundle
from trustscore.services.log import LogService
from trustscore.services.metrics import Metrics
from trustscore.services.public import PublicService
from trustscore.services.ratings import RatingService, load_models
from trustscore.settings import Settings
from trustscore.store import db
from trustscore.store.attestations import AttestationStore
from trustscore.store.log import LogStore
from trustscore.store.projection_tables import ProjectionStore

Client = AsyncTestClient[Litestar]
AGENTS = DEFAULT_PUBLIC_DIR.parent / "examples" / "agents" / "scripted.py"
MODELS = ("trustscore-v2", "baseline-v0.3")
T = TypeVar("T")


async def on_app(client: Client, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
    """Run ``fn(*args)`` on the app's own event loop (its database pool lives there)."""
    result: T = await asyncio.to_thread(client.blocking_portal.call, fn, *args)
    return result


@contextlib.asynccontextmanager
async def from_address(client: Client, host: str) -> AsyncIterator[httpx.AsyncClient]:
    """An httpx client of ``client``'s app whose requests come from ``host`` (use it on the app's own
    event loop: :func:`on_app`)."""
    transport = httpx.ASGITransport(app=client.app, client=(host, 1234))
    async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
        yield c


async def post(client: Client, path: str, envelope: Any) -> int:
    r = await client.post(path, content=msgspec.json.encode(envelope))
    assert r.status_code == 201, r.text
    data = r.json()
    index: int = (
        data["entries"][0]["index"] if "entries" in data else data.get("evidence_index", data.get("index"))
    )
    return index


async def rated(client: Client, agent: str, model: str, size: int) -> dict[str, Any]:
    for _ in range(400):
        r = await client.get(f"/v1/agents/{agent}/rating", params={"model": model})
        if r.status_code == 200 and r.json()["log_size"] >= size:
            data: dict[str, Any] = r.json()
            return data
        await asyncio.sleep(0.05)
    raise AssertionError(f"no rating of {agent} covering {size} entries")


def public_of(client: Client) -> PublicService:
    return services_of(client.app.state).public


def verify_cli(tmp_path: Path, bundle: Any, *extra: str) -> tuple[int, str]:
    """``trustscore rating verify`` as ``main`` runs it: the exit code and the one-line message."""
    path = tmp_path / "bundle.json"
    path.write_bytes(msgspec.json.encode(bundle))
    parser = argparse.ArgumentParser()
    rating_cli.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["rating", "verify", str(path), *extra])
    try:
        return args.func(args), ""
    except TrustscoreError as exc:
        return 1, exc.message


@pytest.fixture
async def world(client: Client, settings: Settings) -> dict[str, Any]:
    """An agent with graded exam evidence, events of an operator-approved marketplace, settlements of an
    unrated buyer (pooled: evidence/standing.py) around a snapshot, and snapshots of its own."""
    public = public_of(client)
    service = logkey.load_or_create(settings.service_key_file)
    log_key = logkey.load_or_create(settings.log_key_file)
    agent, agent_card = new_card("attested")
    market, buyer = keys.SigningKey.generate(), keys.SigningKey.generate()
    await post(client, "/v1/log/entries", agent_card)
    await post(
        client, "/v1/log/entries", dsse.sign(make_party_card(market.public_key, "m", "marketplace"), [market])
    )
    approval = make_approval(operator=log_key.id, marketplace=market.id, action="approve")
    await post(client, "/v1/log/entries", dsse.sign(approval, [log_key]))
    await post(
        client, "/v1/log/entries", dsse.sign(make_party_card(buyer.public_key, "b", "counterparty"), [buyer])
    )
    exam = load_exam("integrity@1", ExamDirs())
    run = run_exam(exam, agent_from_spec(f"python:{AGENTS}:good"))
    graded = await post(client, "/v1/reports", sign_run(run, agent))
    names: tuple[EventName, ...] = ("delivered", "confirmed", "negotiation_expired")
    for i, name in enumerate(names):
        event = make_event(
            marketplace=market.id, agent=agent.id, event=name, ref=f"o{i}", occurred_at="2026-11-22T00:00:00Z"
        )
        await post(client, "/v1/events", dsse.sign(event, [market]))
    paid = make_settlement(
        deal_id="first",
        seller=agent.id,
        buyer=buyer.id,
        reporter_role="seller",
        settled_at="2026-11-20T00:00:00Z",
        payment="pass",
    )
    last = await post(client, "/v1/settlements", dsse.sign(paid, [agent]))
    await rated(client, agent.id, "trustscore-v2", last + 1)
    # One snapshot per model (sorted by name); trustscore-v2's, the last, is the reporter model's.
    snap = (await on_app(client, snapshots.take, public.log, public.ratings, service))[-1]
    delivered = make_settlement(
        deal_id="second",
        seller=agent.id,
        buyer=buyer.id,
        reporter_role="buyer",
        settled_at="2026-11-23T00:00:00Z",
        delivery="pass",
        confirmed=True,
    )
    settlement = await post(client, "/v1/settlements", dsse.sign(delivered, [buyer]))
    assert settlement > snap.index
    await rated(client, agent.id, "trustscore-v2", settlement + 1)
    own = await on_app(client, snapshots.take, public.log, public.ratings, service)
    size = max(a.index for a in own) + 1
    for model in MODELS:
        await rated(client, agent.id, model, size)
    store = AttestationStore(public.store.pool)
    return {
        "public": public,
        "store": store,
        "service": service,
        "agent": agent,
        "buyer": buyer,
        "graded": graded,
    }


async def test_a_bundle_of_real_evidence_verifies_offline(
    client: Client, world: dict[str, Any], tmp_path: Path
) -> None:
    agent = world["agent"]
    vkey = (await client.get("/v1/log/key")).text.strip()
    for model in MODELS:
        bundle = await on_app(
            client, build_bundle, world["public"], world["store"], world["service"], agent.id, model
        )
        served = (await client.get(f"/v1/agents/{agent.id}/rating", params={"model": model})).json()
        a = attestation.parse_attestation(bundle.attestation)
        assert (a.total, a.adjusted, a.grade, a.n) == (
            served["total"],
            served["adjusted"],
            served["grade"],
            served["n"],
        )
        assert a.dimensions == {
            name: None if d["score"] is None else attestation.micros(d["score"])
            for name, d in served["dimensions"].items()
        }
        assert a.coverage_micros == attestation.micros(served["coverage"])
        assert a.computed_at == served["computed_at"] and a.log_size == served["log_size"]
        assert a.total is not None and a.n > 0
        # The entries: service card, the agent's and counterparties' cards, evidence, and its own
        # snapshots where the model's reliability reads them (baseline-v0.3's consistency; trustscore-v2's
        # reads none, and no reporter here has a snapshot that would bring them).
        assert 0 in a.evidence_entries
        own = await on_app(client, world["store"].snapshot_entries, agent.id, model, a.log_size)
        assert len(own) >= 2  # the fixture's two, and an hourly one if the clock passed an hour
        assert set(own) & set(a.evidence_entries) == (set(own) if model == "baseline-v0.3" else set())
        code, message = verify_cli(tmp_path, bundle, "--verifier-key", vkey)
        assert (code, message) == (0, ""), message


async def test_tampering_is_named(client: Client, world: dict[str, Any], tmp_path: Path) -> None:
    agent, service = world["agent"], world["service"]
    bundle = await on_app(
        client, build_bundle, world["public"], world["store"], service, agent.id, "baseline-v0.3"
    )
    good: dict[str, Any] = msgspec.to_builtins(bundle)
    raw = json.loads(canonical.b64decode(bundle.attestation.payload))
    total = raw["predicate"]["total"]

    # A number changed in the signed payload: the attestation's signature fails.
    data = json.loads(json.dumps(good))
    changed = {**raw, "predicate": {**raw["predicate"], "total": total + 1}}
    data["attestation"]["payload"] = canonical.b64encode(canonical.encode(changed))
    code, message = verify_cli(tmp_path, data)
    assert code == 1 and message.startswith(f"attestation: signature by {service.id} does not verify"), (
        message
    )

    # A number changed and signed again with the server's own key: recomputation names it.
    data = json.loads(json.dumps(good))
    data["attestation"] = msgspec.to_builtins(dsse.sign(canonical.encode(changed), [service]))
    code, message = verify_cli(tmp_path, data)
    assert (code, message) == (1, f"total: attested {total + 1}, recomputed {total}")

    # One bit of one proof hash flipped: the entry is named.
    data = json.loads(json.dumps(good))
    entry = next(e for e in data["entries"] if e["proof"])
    proof = bytearray(base64.b64decode(entry["proof"][-1]))
    proof[7] ^= 0x10
    entry["proof"][-1] = base64.b64encode(bytes(proof)).decode()
    code, message = verify_cli(tmp_path, data)
    assert code == 1 and message.startswith(f"entry {entry['index']}: inclusion proof does not verify"), (
        message
    )

    # An evidence entry dropped from the bundle: named.
    data = json.loads(json.dumps(good))
    evidence_index = max(e["index"] for e in data["entries"])
    data["entries"] = [e for e in data["entries"] if e["index"] != evidence_index]
    code, message = verify_cli(tmp_path, data)
    assert (code, message) == (
        1,
        f"entry {evidence_index} is listed in evidence_entries but missing from the bundle",
    )

    # The graded exam dropped from the signed list too (the server lying by omission): the count and the
    # numbers recomputed from what is left differ from those attested.
    data = json.loads(json.dumps(good))
    data["entries"] = [e for e in data["entries"] if e["index"] != world["graded"]]
    kept = [i for i in raw["predicate"]["evidence_entries"] if i != world["graded"]]
    omitted = {**raw, "predicate": {**raw["predicate"], "evidence_entries": kept}}
    a = msgspec.convert(omitted["predicate"], attestation.RatingAttestationV2)
    omitted["subject"] = [msgspec.to_builtins(attestation.attestation_subject(a))]
    data["attestation"] = msgspec.to_builtins(dsse.sign(canonical.encode(omitted), [service]))
    code, message = verify_cli(tmp_path, data)
    assert code == 1 and message.startswith(("total: attested", "n: attested")), message

    # Another log's key trusted: refused before anything else.
    other = keys.SigningKey.generate()
    code, message = verify_cli(
        tmp_path, good, "--verifier-key", note.make_verifier_key("x", other.public_key)
    )
    assert code == 1 and "not the trusted" in message


def attestation_app(settings: Settings, dsn: str) -> Litestar:
    """The controller on its own app, wired as api/app.py would wire it, reading the same database."""
    services: dict[str, AttestationService] = {}

    @contextlib.asynccontextmanager
    async def lifespan(_app: Litestar) -> AsyncIterator[None]:
        pool = await db.create_pool(dsn, min_size=1, max_size=4)
        try:
            log_key = logkey.load_or_create(settings.log_key_file)
            log = LogService(LogStore(pool), log_key, settings.log_origin, max_batch=settings.max_batch)
            projections = ProjectionStore(pool)
            ratings = RatingService(projections, load_models(), Metrics())
            await ratings.refresh()
            public = PublicService(log, projections, ratings, ExamDirs())
            service_key = logkey.load_or_create(settings.service_key_file)
            services["attestations"] = AttestationService(public, AttestationStore(pool), service_key)
            yield
        finally:
            await pool.close()

    return Litestar(
        route_handlers=[AttestationController],
        dependencies={"attestations": Provide(lambda: services["attestations"], sync_to_thread=False)},
        lifespan=[lifespan],
        exception_handlers=EXCEPTION_HANDLERS,
    )


async def test_the_route_serves_bundles_and_credentials(
    world: dict[str, Any], settings: Settings, dsn: str, tmp_path: Path
) -> None:
    agent = world["agent"]
    async with AsyncTestClient(app=attestation_app(settings, dsn)) as c:
        r = await c.get(f"/v1/agents/{agent.id}/rating/attestation")
        assert r.status_code == 200, r.text
        code, message = verify_cli(tmp_path, r.json())
        assert code == 0, message
        r = await c.get(
            f"/v1/agents/{agent.id}/rating/attestation", params={"format": "vc", "model": "baseline-v0.3"}
        )
        assert r.status_code == 200, r.text
        credential = r.json()
        assert credential["type"] == ["VerifiableCredential", "TrustscoreRatingCredential"]
        assert credential["issuer"] == "did:key:" + credential["proof"]["verificationMethod"].split("#")[1]
        document = attestation.verify_rating_credential(credential)
        assert document["credentialSubject"]["agent"] == agent.id
        path = tmp_path / "vc.json"
        path.write_text(json.dumps(credential))
        parser = argparse.ArgumentParser()
        rating_cli.register(parser.add_subparsers(dest="command"))
        args = parser.parse_args(["rating", "verify-vc", str(path)])
        assert args.func(args) == 0
        credential["credentialSubject"]["total"] += 1
        with pytest.raises(TrustscoreError, match="does not verify"):
            attestation.verify_rating_credential(credential)
        r = await c.get(f"/v1/agents/ts1_{'0' * 40}/rating/attestation")
        assert r.status_code == 404
        schema = (await c.get("/schema/openapi.json")).json()
        assert "getRatingAttestation" in json.dumps(schema)


async def test_a_vouched_reporter_chain_verifies_offline(
    client: Client, settings: Settings, tmp_path: Path
) -> None:
    """review-integrity: a reporter with standing by rating needs a vouch (evidence/standing.py); the
    bundle must carry the vouching entry and what gave its reporter standing, or it does not recompute."""
    from trustscore.kinds.snapshots import SnapshotRow, make_rating_snapshot
    from trustscore.ledger.submission import prepare
    from trustscore.services.ratings import load_models

    public = public_of(client)
    service = logkey.load_or_create(settings.service_key_file)
    log_key = logkey.load_or_create(settings.log_key_file)
    agent, agent_card = new_card("target")
    reporter, reporter_card = new_card("reporter")
    market = keys.SigningKey.generate()
    for card in (agent_card, reporter_card):
        await post(client, "/v1/log/entries", card)
    await post(
        client, "/v1/log/entries", dsse.sign(make_party_card(market.public_key, "m", "marketplace"), [market])
    )
    approval = make_approval(operator=log_key.id, marketplace=market.id, action="approve")
    await post(client, "/v1/log/entries", dsse.sign(approval, [log_key]))
    exam = load_exam("delivery@1", ExamDirs())
    await post(
        client, "/v1/reports", sign_run(run_exam(exam, agent_from_spec(f"python:{AGENTS}:good")), agent)
    )
    digest = load_models()["trustscore-v2"].digest
    for n, taken in enumerate(("2026-09-01T00:00:00Z", "2026-10-15T00:00:00Z")):
        snap = make_rating_snapshot(
            signer=service.id, model_version="trustscore-v2", weights_digest=digest, log_size=6 + n,
            taken_at=taken, ratings=[SnapshotRow(agent=reporter.id, total=700, adjusted=700)],
        )  # fmt: skip
        prepared = [prepare(msgspec.to_builtins(dsse.sign(snap, [service])))]
        await on_app(client, public.log.append, prepared)  # the server's own kind: logged as it does
    vouch = make_event(
        marketplace=market.id,
        agent=reporter.id,
        event="delivered",
        ref="v",
        occurred_at="2026-10-20T00:00:00Z",
    )
    vouch_index = await post(client, "/v1/events", dsse.sign(vouch, [market]))
    deal = make_settlement(
        deal_id="d", seller=agent.id, buyer=reporter.id, reporter_role="buyer",
        settled_at="2026-11-20T00:00:00Z", delivery="pass", confirmed=True,
    )  # fmt: skip
    last = await post(client, "/v1/settlements", dsse.sign(deal, [reporter]))
    served = await rated(client, agent.id, "trustscore-v2", last + 1)
    assert served["dimensions"]["economic"]["score"] is not None  # the reporter's word counted in full
    store = AttestationStore(public.store.pool)
    vkey = (await client.get("/v1/log/key")).text.strip()
    bundle = await on_app(client, build_bundle, public, store, service, agent.id, "trustscore-v2")
    assert vouch_index in attestation.parse_attestation(bundle.attestation).evidence_entries
    code, message = verify_cli(tmp_path, bundle, "--verifier-key", vkey)
    assert (code, message) == (0, ""), message
