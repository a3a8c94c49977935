"""Every snapshot period logs an entry with a row for each rated agent under every served model, and a
rating attestation's bundle carried every one of the agent's own: after about 80 days of hourly snapshots
the bundle passed its bound, and the agent's rating could no longer be attested. Only a model whose
reliability reads them (baseline-v0.3's consistency term) needs them; trustscore-v2's and v3's bundles now
carry only the snapshots that weigh a report, the agent's own included when it reports itself."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import msgspec
import pytest

from tests.helpers import new_card
from tests.integration.api.test_attestation_limits import EVENTS, World, get
from tests.integration.api.test_attestation_limits import world as world  # the fixture
from tests.integration.api.test_attestations import Client, on_app, post, public_of, rated, verify_cli
from trustscore.api.wiring import services_of
from trustscore.attestations import rating as attestation
from trustscore.canonical import b64decode
from trustscore.kinds.approvals import make_approval
from trustscore.kinds.events import make_event
from trustscore.kinds.parties import make_party_card
from trustscore.kinds.snapshots import SnapshotRow, make_rating_snapshot
from trustscore.kinds.work_records import make_work_record
from trustscore.ledger import audit, dsse, keys, statements
from trustscore.ledger.submission import prepare
from trustscore.services import logkey, snapshots
from trustscore.settings import SERVABLE_MODELS, Settings
from trustscore.store.attestations import AttestationStore

PERIODS = 4
BASELINE = "baseline-v0.3"
UNREAD = ("trustscore-v2", "trustscore-v3")  # models whose reliability reads no snapshots


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return dataclasses.replace(settings, models=",".join(SERVABLE_MODELS))


async def test_a_model_that_reads_no_snapshots_attests_a_long_rated_agent(
    client: Client, world: World, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    busy = world.agents[0]
    world.limits(reuse_s=0.0)
    models = (*UNREAD, BASELINE)
    before = {model: await get(client, busy, model=model) for model in models}
    service_key = logkey.load_or_create(settings.service_key_file)
    public = services_of(client.app.state).public
    taken: list[int] = []
    for _ in range(PERIODS):
        taken += [
            a.index for a in await on_app(client, snapshots.take, public.log, public.ratings, service_key)
        ]
    size = max(taken) + 1
    store = AttestationStore(public.store.pool)
    asked: list[str] = []  # the models whose own snapshots were counted or listed
    count, listing = AttestationStore.snapshot_entry_count, AttestationStore.snapshot_entries

    async def counted(self: AttestationStore, agent: str, model: str, *args: Any) -> Any:
        asked.append(model)
        return await count(self, agent, model, *args)

    async def listed(self: AttestationStore, agent: str, model: str, *args: Any) -> Any:
        asked.append(model)
        return await listing(self, agent, model, *args)

    monkeypatch.setattr(AttestationStore, "snapshot_entry_count", counted)
    monkeypatch.setattr(AttestationStore, "snapshot_entries", listed)
    entries: dict[str, list[int]] = {}
    for model in models:
        await rated(client, busy.id, model, size)
        # The snapshots this test took with a row for the agent (an hourly one may come on top).
        own = set(await on_app(client, listing, store, busy.id, model, size)) & set(taken)
        assert len(own) == PERIODS
        r = await get(client, busy, model=model)
        assert r.status_code == 200, r.text
        bundle = attestation.decode_bundle(r.content)
        a = attestation.parse_attestation(bundle.attestation)
        assert a.log_size >= size and [e.index for e in bundle.entries] == a.evidence_entries
        attestation.verify_bundle(bundle, public.ratings.model(model))  # the rating reproduces offline
        entries[model] = a.evidence_entries
        old = attestation.parse_attestation(attestation.decode_bundle(before[model].content).attestation)
        if model == BASELINE:
            assert own <= set(a.evidence_entries) and set(old.evidence_entries) <= set(a.evidence_entries)
        else:
            assert not own & set(a.evidence_entries)
            assert a.evidence_entries == old.evidence_entries  # the same entries, months on or not
    assert set(asked) == {BASELINE}  # neither counted nor listed for the others
    # At a bound its own snapshots pass, the default model's attestation is still served.
    assert len(entries[BASELINE]) >= len(entries["trustscore-v2"]) + PERIODS > EVENTS + PERIODS
    world.limits(max_entries=len(entries["trustscore-v2"]))
    assert (await get(client, busy, model=BASELINE)).status_code == 422
    for model in UNREAD:
        assert (await get(client, busy, model=model)).status_code == 200


async def test_an_agent_reporting_itself_brings_its_own_snapshots_that_decide_its_standing(
    client: Client, settings: Settings, tmp_path: Path
) -> None:
    """Under standing-v1 a self-attested work record counted in full if its reporter, the agent, had
    standing, which its own trustscore-v2 snapshots decided, so the bundle had to carry them (found by
    review). They are still found, as any reporter's are, and the bundle verifies under every model; since
    standing-v2 the agent's word about itself is pooled whatever its standing, so they no longer move its
    rating (tests/unit/evidence/test_self_attested_standing.py)."""
    public = public_of(client)
    service = logkey.load_or_create(settings.service_key_file)
    log_key = logkey.load_or_create(settings.log_key_file)
    agent, agent_card = new_card("self")
    market = keys.SigningKey.generate()
    await post(client, "/v1/log/entries", agent_card)
    card = make_party_card(market.public_key, "m", "marketplace")
    await post(client, "/v1/log/entries", dsse.sign(card, [market]))
    approval = make_approval(operator=log_key.id, marketplace=market.id, action="approve")
    await post(client, "/v1/log/entries", dsse.sign(approval, [log_key]))
    vouch = make_event(
        marketplace=market.id, agent=agent.id, event="delivered", ref="v", occurred_at="2026-08-20T00:00:00Z"
    )
    await post(client, "/v1/events", dsse.sign(vouch, [market]))
    digest = public.ratings.model("trustscore-v2").digest
    own: list[int] = []
    for n, taken_at in enumerate(("2026-09-01T00:00:00Z", "2026-10-15T00:00:00Z")):
        snap = make_rating_snapshot(
            signer=service.id,
            model_version="trustscore-v2",
            weights_digest=digest,
            log_size=5 + n,
            taken_at=taken_at,
            ratings=[SnapshotRow(agent=agent.id, total=700, adjusted=700)],
        )
        prepared = [prepare(msgspec.to_builtins(dsse.sign(snap, [service])))]
        own += [a.index for a in await on_app(client, public.log.append, prepared)]
    last = 0
    for i in range(5):
        record = make_work_record(
            reporter=agent.id,
            agent=agent.id,
            task_ref=f"T-{i}",
            claimed_outcome="done",
            finished_at="2026-11-20T00:00:00Z",
        )
        last = await post(client, "/v1/work-records", dsse.sign(record, [agent]))
    vkey = (await client.get("/v1/log/key")).text.strip()
    for model in (*UNREAD, BASELINE):
        await rated(client, agent.id, model, last + 1)
        r = await get(client, agent, model=model)
        assert r.status_code == 200, r.text
        bundle = attestation.decode_bundle(r.content)
        a = attestation.parse_attestation(bundle.attestation)
        assert set(own) <= set(a.evidence_entries)
        assert verify_cli(tmp_path, bundle, "--verifier-key", vkey) == (0, "")
        if model in UNREAD:  # its own records are pooled: the rating is the same without them
            weights = public.ratings.model(model)
            at = statements.parse_time(a.computed_at, what="computed_at")
            leaves = [(e.index, audit.parse_leaf(b64decode(e.leaf)).statement) for e in bundle.entries]
            full = attestation.recompute(leaves, agent.id, weights, at)
            without = attestation.recompute([e for e in leaves if e[0] not in own], agent.id, weights, at)
            assert full.total == a.total and without.total == full.total
