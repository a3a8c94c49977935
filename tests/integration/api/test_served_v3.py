"""trustscore-v3 served (TRUSTSCORE_MODELS): its ratings, refreshed to a new time from kept sums, are
what an offline recomputation of the signed evidence gives (``trustscore rating verify`` of a bundle),
under every served model, before and after the periodic refresh."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from tests.helpers import new_card
from tests.integration.api.test_attestations import AGENTS, on_app, post, public_of, rated, verify_cli
from trustscore.api.app import create_app
from trustscore.exams.loader import ExamDirs, load_exam
from trustscore.kinds.settlements import make_settlement
from trustscore.ledger import dsse
from trustscore.sdk import agent_from_spec, run_exam
from trustscore.sdk.runner import sign_run
from trustscore.services import logkey
from trustscore.services.attestations import build_bundle
from trustscore.services.ratings import RatingService
from trustscore.settings import SERVABLE_MODELS, Settings
from trustscore.store.attestations import AttestationStore

Client = AsyncTestClient[Litestar]


@pytest.fixture
async def client(settings: Settings, dsn: str) -> AsyncIterator[Client]:
    every = dataclasses.replace(settings, models=",".join(SERVABLE_MODELS))
    async with AsyncTestClient(app=create_app(every, dsn)) as c:
        yield c


async def test_every_served_model_verifies_offline_before_and_after_the_time_refresh(
    client: Client, settings: Settings, tmp_path: Path
) -> None:
    schema = (await client.get("/schema/openapi.json")).json()
    rating_op = schema["paths"]["/v1/agents/{agent_id}/rating"]["get"]
    [model_parameter] = [p for p in rating_op["parameters"] if p["name"] == "model"]
    assert model_parameter["schema"]["enum"] == list(SERVABLE_MODELS)

    agent, card = new_card("v3")
    buyer, buyer_card = new_card("buyer")
    await post(client, "/v1/log/entries", card)
    await post(client, "/v1/log/entries", buyer_card)
    run = run_exam(load_exam("integrity@1", ExamDirs()), agent_from_spec(f"python:{AGENTS}:good"))
    await post(client, "/v1/reports", sign_run(run, agent))
    for n, settled in enumerate(("2026-10-20T00:00:00Z", "2026-11-23T00:00:00Z")):
        deal = make_settlement(
            deal_id=f"d{n}",
            seller=agent.id,
            buyer=buyer.id,
            reporter_role="buyer",
            settled_at=settled,
            delivery="pass",
            confirmed=True,
        )
        last = await post(client, "/v1/settlements", dsse.sign(deal, [buyer]))
    public = public_of(client)
    service = logkey.load_or_create(settings.service_key_file)
    store = AttestationStore(public.store.pool)
    vkey = (await client.get("/v1/log/key")).text.strip()
    ratings = public.ratings
    assert isinstance(ratings, RatingService)
    for refreshed in (False, True):
        if refreshed:
            before = ratings.stored(agent.id, "trustscore-v3")
            await on_app(client, ratings.recompute_all)  # the periodic decay refresh: kept states
            after = ratings.stored(agent.id, "trustscore-v3")
            assert before is not None and after is not None and after.at > before.at
        for model in SERVABLE_MODELS:
            served = await rated(client, agent.id, model, last + 1)
            assert served["model_version"] == model and served["total"] is not None, served
            bundle = await on_app(client, build_bundle, public, store, service, agent.id, model)
            code, message = verify_cli(tmp_path, bundle, "--verifier-key", vkey)
            assert (code, message) == (0, ""), (model, message)
