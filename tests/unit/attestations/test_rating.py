"""Rating attestations, purely: the kind's checks, fixed-point numbers, bundles built from an in-memory
log verified offline, and every tampering named."""

from __future__ import annotations

import base64
import copy
import datetime as dt
from dataclasses import dataclass
from typing import Any

import msgspec
import pytest

from tests.helpers import new_card
from trustscore import canonical
from trustscore.attestations import rating as att
from trustscore.errors import InvalidInput, ProofError, SignatureError, VerificationError
from trustscore.evidence.project_log import DERIVATION, ProjectionState, project
from trustscore.kinds.admission import admit
from trustscore.kinds.approvals import make_approval
from trustscore.kinds.events import EventName, make_event
from trustscore.kinds.parties import make_party_card
from trustscore.kinds.service_card import make_service_card
from trustscore.kinds.settlements import make_settlement
from trustscore.kinds.snapshots import SnapshotRow, make_rating_snapshot
from trustscore.ledger import dsse, keys, merkle, note, statements
from trustscore.ledger.checkpoint import Checkpoint, sign_checkpoint
from trustscore.ledger.submission import prepare
from trustscore.scoring.ratings import Rating, score_agents
from trustscore.services.ratings import load_models

MODELS = load_models()
AT = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
ORIGIN = "test.local/log"


@dataclass
class Log:
    log_key: keys.SigningKey
    service: keys.SigningKey
    agent: keys.SigningKey
    leaves: list[bytes]
    agent_entries: list[int]

    @property
    def verifier_key(self) -> str:
        return note.make_verifier_key(ORIGIN, self.log_key.public_key)

    def checkpoint(self) -> tuple[Checkpoint, str]:
        root = merkle.root_from_leaf_hashes([merkle.leaf_hash(x) for x in self.leaves])
        cp = Checkpoint(ORIGIN, len(self.leaves), root)
        return cp, sign_checkpoint(cp, self.log_key)


def _leaf(envelope: dsse.Envelope) -> bytes:
    return dsse.leaf_bytes(envelope)


@pytest.fixture(scope="module")
def log() -> Log:
    """Service card, agent, marketplace, a counterparty rated in a snapshot before its settlement, an
    event, an unrelated agent, and a snapshot of the agent itself."""
    log_key, service = keys.SigningKey.generate(), keys.SigningKey.generate()
    agent, agent_card = new_card("rated")
    market, buyer = keys.SigningKey.generate(), keys.SigningKey.generate()
    _, stranger_card = new_card("stranger")
    leaves = [
        _leaf(
            dsse.sign(
                make_service_card(service.public_key, "svc", ["grader", "snapshot"]), [service, log_key]
            )
        ),
        _leaf(agent_card),
        _leaf(dsse.sign(make_party_card(market.public_key, "market", "marketplace"), [market])),
        # The operator approves the marketplace: its events count as standing evidence.
        _leaf(
            dsse.sign(make_approval(operator=log_key.id, marketplace=market.id, action="approve"), [log_key])
        ),
        _leaf(dsse.sign(make_party_card(buyer.public_key, "buyer", "counterparty"), [buyer])),
        *(
            _leaf(
                dsse.sign(
                    make_rating_snapshot(
                        signer=service.id,
                        model_version="trustscore-v2",
                        weights_digest=MODELS["trustscore-v2"].digest,
                        log_size=5 + n,
                        taken_at=taken,
                        ratings=[SnapshotRow(agent=buyer.id, total=800, adjusted=780)],
                    ),
                    [service],
                )
            )
            for n, taken in enumerate(("2026-09-01T00:00:00Z", "2026-11-01T00:00:00Z"))
        ),
        # The approved marketplace sold to the buyer and reported it: a vouch (standing-v1 needs one).
        _leaf(
            dsse.sign(
                make_settlement(
                    deal_id="m1",
                    seller=market.id,
                    buyer=buyer.id,
                    reporter_role="seller",
                    settled_at="2026-08-01T00:00:00Z",
                    payment="pass",
                ),
                [market],
            )
        ),
        _leaf(
            dsse.sign(
                make_settlement(
                    deal_id="d1",
                    seller=agent.id,
                    buyer=buyer.id,
                    reporter_role="buyer",
                    settled_at="2026-11-02T00:00:00Z",
                    delivery="late",
                    confirmed=True,
                ),
                [buyer],
            )
        ),
        _leaf(stranger_card),
    ]
    names: tuple[EventName, ...] = ("delivered", "signature_invalid", "delivery_failed")
    for i, name in enumerate(names):
        event = make_event(
            marketplace=market.id, agent=agent.id, event=name, ref=f"o{i}", occurred_at="2026-11-03T00:00:00Z"
        )
        leaves.append(_leaf(dsse.sign(event, [market])))
    leaves.append(
        _leaf(
            dsse.sign(
                make_rating_snapshot(
                    signer=service.id,
                    model_version="trustscore-v2",
                    weights_digest=MODELS["trustscore-v2"].digest,
                    log_size=len(leaves),
                    taken_at="2026-11-04T00:00:00Z",
                    ratings=[SnapshotRow(agent=agent.id, total=500, adjusted=490)],
                ),
                [service],
            )
        )
    )
    return Log(log_key, service, agent, leaves, agent_entries=[0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 11, 12, 13])


def served_rating(log: Log, model: str) -> Rating:
    """The rating as the server computes it: the projection of the whole log, then the engine."""
    out = project(list(enumerate(log.leaves)), ProjectionState(log.log_key.public_key), verify=True)
    assert not out.rejected
    evidence = [e for e in out.evidence if e.agent == log.agent.id]
    snaps = [s.snapshot for s in out.snapshots if s.snapshot.model_version == model]
    from trustscore.evidence.derive import evidence_batch

    [rating] = score_agents(evidence_batch(evidence), snaps, MODELS[model], AT, agents=[log.agent.id])
    return rating


def build(log: Log, model: str = "trustscore-v2", rating: Rating | None = None) -> att.Bundle:
    cp, signed = log.checkpoint()
    payload = att.make_rating_attestation(
        rating or served_rating(log, model),
        signer=log.service.id,
        computed_at=AT,
        log_size=len(log.leaves),
        checkpoint=cp,
        evidence_entries=log.agent_entries,
    )
    hashes = [merkle.leaf_hash(x) for x in log.leaves]
    return att.make_bundle(
        dsse.sign(payload, [log.service]),
        log_verifier_key=log.verifier_key,
        checkpoint_note=signed,
        entries=[(i, log.leaves[i], merkle.inclusion_proof(i, cp.size, hashes)) for i in log.agent_entries],
        weights_model=model,
    )


def as_json(bundle: att.Bundle) -> dict[str, Any]:
    data: dict[str, Any] = msgspec.to_builtins(bundle)
    return data


def from_json(data: dict[str, Any]) -> att.Bundle:
    return att.decode_bundle(msgspec.json.encode(data))


def resigned(bundle: att.Bundle, key: keys.SigningKey, v1: bool = False, **changes: Any) -> att.Bundle:
    """The bundle with its attestation's predicate changed and signed again by ``key`` (as a
    ``rating-attestation/v1``, which names no derivation, if ``v1``)."""
    raw = msgspec.json.decode(canonical.b64decode(bundle.attestation.payload))
    raw["predicate"].update(changes)
    if v1:
        del raw["predicate"]["derivation"]
        raw["predicateType"] = att.RATING_ATTESTATION_V1.predicate_type
    a = msgspec.convert(raw["predicate"], att.RatingAttestation if v1 else att.RatingAttestationV2)
    raw["subject"] = [msgspec.to_builtins(att.attestation_subject(a))]
    data = as_json(bundle)
    data["attestation"] = msgspec.to_builtins(dsse.sign(canonical.encode(raw), [key]))
    return from_json(data)


@pytest.mark.parametrize("model", ["trustscore-v2", "baseline-v0.3"])
def test_a_bundle_verifies_and_recomputes_every_number(log: Log, model: str) -> None:
    bundle = build(log, model)
    verified = att.verify_bundle(bundle, MODELS[model], note.parse_verifier_key(log.verifier_key))
    assert verified.signer == log.service.id
    assert verified.attestation.numbers() == att.rating_numbers(served_rating(log, model))
    assert verified.attestation.n == verified.rating.n > 0
    assert verified.attestation.evidence_entries == log.agent_entries


def test_the_reporter_snapshot_weights_the_settlement(log: Log) -> None:
    """Without the reporter's newest snapshot it has no standing (rated for 0 days): the numbers change."""
    bundle = build(log, "baseline-v0.3")
    a = att.parse_attestation(bundle.attestation)
    assert a.dimensions["delivery"] is not None and a.dimensions["economic"] is not None
    lying = resigned(bundle, log.service, evidence_entries=[i for i in a.evidence_entries if i != 6])
    data = as_json(lying)
    data["entries"] = [e for e in data["entries"] if e["index"] != 6]
    with pytest.raises(VerificationError, match=r"^total: attested [0-9]+, recomputed [0-9]+$"):
        att.verify_bundle(from_json(data), MODELS["baseline-v0.3"])


def test_numbers_are_fixed_point_integers(log: Log) -> None:
    a = build(log).attestation
    payload = canonical.b64decode(a.payload)
    assert b"." not in msgspec.json.encode(msgspec.json.decode(payload)["predicate"]["dimensions"])
    assert att.micros(0.5) == 500_000 and att.micros(12.3456785) == 12_345_678  # half to even at 10^-6
    with pytest.raises(InvalidInput, match="floats"):
        canonical.encode({"x": 0.1})


def test_a_changed_number_fails_the_signature(log: Log) -> None:
    bundle = build(log)
    raw = msgspec.json.decode(canonical.b64decode(bundle.attestation.payload))
    raw["predicate"]["total"] = (raw["predicate"]["total"] or 0) + 1
    data = as_json(bundle)
    data["attestation"]["payload"] = canonical.b64encode(canonical.encode(raw))
    with pytest.raises(SignatureError, match=r"attestation: signature by .* does not verify"):
        att.verify_bundle(from_json(data), MODELS["trustscore-v2"])


def test_a_signed_wrong_number_is_named(log: Log) -> None:
    """A number changed and signed again by the service key itself: recomputation names it."""
    bundle = build(log, "baseline-v0.3")
    a = att.parse_attestation(bundle.attestation)
    assert a.total is not None
    lying = resigned(bundle, log.service, total=a.total + 14)
    with pytest.raises(VerificationError, match=f"^total: attested {a.total + 14}, recomputed {a.total}$"):
        att.verify_bundle(lying, MODELS["baseline-v0.3"])
    score = a.dimensions["delivery"]
    assert score is not None
    lying = resigned(bundle, log.service, dimensions={**a.dimensions, "delivery": score - 1})
    with pytest.raises(
        VerificationError, match=f"^dimensions.delivery: attested {score - 1}, recomputed {score}$"
    ):
        att.verify_bundle(lying, MODELS["baseline-v0.3"])
    lying = resigned(bundle, log.service, coverage_micros=a.coverage_micros - 1)
    with pytest.raises(VerificationError, match=r"^coverage_micros: attested"):
        att.verify_bundle(lying, MODELS["baseline-v0.3"])


def test_a_flipped_proof_bit_names_the_entry(log: Log) -> None:
    data = as_json(build(log))
    proof = bytearray(base64.b64decode(data["entries"][4]["proof"][0]))
    proof[0] ^= 1
    data["entries"][4]["proof"][0] = base64.b64encode(bytes(proof)).decode()
    index = data["entries"][4]["index"]
    with pytest.raises(ProofError, match=f"^entry {index}: inclusion proof does not verify"):
        att.verify_bundle(from_json(data), MODELS["trustscore-v2"])


def test_a_dropped_entry_is_named(log: Log) -> None:
    data = as_json(build(log))
    dropped = data["entries"].pop(5)
    with pytest.raises(VerificationError, match=f"^entry {dropped['index']} is listed in evidence_entries"):
        att.verify_bundle(from_json(data), MODELS["trustscore-v2"])


def test_dropping_an_entry_from_the_list_too_changes_the_numbers(log: Log) -> None:
    """Drop an event and re-sign: the recomputed count no longer matches the attested n."""
    bundle = build(log)
    a = att.parse_attestation(bundle.attestation)
    entries = [i for i in a.evidence_entries if i != 12]
    lying = resigned(bundle, log.service, evidence_entries=entries)
    data = as_json(lying)
    data["entries"] = [e for e in data["entries"] if e["index"] != 12]
    with pytest.raises(VerificationError, match=r"^[a-z_.]+: attested"):
        att.verify_bundle(from_json(data), MODELS["trustscore-v2"])


def test_a_card_missing_makes_its_statements_fail(log: Log) -> None:
    bundle = build(log)
    a = att.parse_attestation(bundle.attestation)
    lying = resigned(bundle, log.service, evidence_entries=[i for i in a.evidence_entries if i != 2])
    data = as_json(lying)
    data["entries"] = [e for e in data["entries"] if e["index"] != 2]
    with pytest.raises(VerificationError, match=r"^entry 3: marketplace \S+ is not registered"):
        att.verify_bundle(from_json(data), MODELS["trustscore-v2"])


def test_signer_must_be_a_service_key_with_the_snapshot_role(log: Log) -> None:
    bundle = build(log)
    with pytest.raises(InvalidInput, match="does not attest its own rating"):
        att.verify_bundle(resigned(bundle, log.agent, signer=log.agent.id), MODELS["trustscore-v2"])
    impostor = keys.SigningKey.generate()
    with pytest.raises(VerificationError, match="not a service key registered"):
        att.verify_bundle(resigned(bundle, impostor, signer=impostor.id), MODELS["trustscore-v2"])


def test_checkpoint_weights_and_verifier_key_are_checked(log: Log) -> None:
    bundle = build(log)
    with pytest.raises(VerificationError, match="weights_digest: attested"):
        att.verify_bundle(bundle, MODELS["baseline-v0.3"].__class__(MODELS["trustscore-v2"].spec, "0" * 64))
    other = note.make_verifier_key(ORIGIN, keys.SigningKey.generate().public_key)
    with pytest.raises(VerificationError, match="not the trusted"):
        att.verify_bundle(bundle, MODELS["trustscore-v2"], note.parse_verifier_key(other))
    data = as_json(bundle)
    data["log_verifier_key"] = other
    with pytest.raises(SignatureError, match="no signature by key"):
        att.verify_bundle(from_json(data), MODELS["trustscore-v2"])
    lying = resigned(bundle, log.service, log_size=3, evidence_entries=[0, 1, 2])
    with pytest.raises(VerificationError, match=r"^entry 3 is in the bundle but not listed"):
        att.verify_bundle(lying, MODELS["trustscore-v2"])


def test_the_kind_is_refused_by_the_log(log: Log) -> None:
    bundle = build(log)
    prepared = prepare(msgspec.to_builtins(bundle.attestation))
    assert prepared.statement.kind is att.RATING_ATTESTATION
    with pytest.raises(InvalidInput, match="no admission rule for rating-attestation"):
        admit(prepared.statement, [log.service.id], lambda _k: None, log.log_key.id)


def test_the_kind_checks_its_fields(log: Log) -> None:
    rating = served_rating(log, "trustscore-v2")
    cp, _ = log.checkpoint()
    common: dict[str, Any] = {"signer": log.service.id, "computed_at": AT, "checkpoint": cp}
    with pytest.raises(InvalidInput, match="log_size"):
        att.make_rating_attestation(rating, log_size=cp.size + 1, evidence_entries=[0], **common)
    with pytest.raises(InvalidInput, match="evidence_entries"):
        att.make_rating_attestation(rating, log_size=2, evidence_entries=[0, 5], **common)
    nulls = msgspec.structs.replace(rating, total=None)
    with pytest.raises(InvalidInput, match="total is null without a reason"):
        att.make_rating_attestation(
            msgspec.structs.replace(nulls, null_reasons={}), log_size=2, evidence_entries=[0], **common
        )


def test_rating_credential_round_trip_and_tamper(log: Log) -> None:
    a = att.parse_attestation(build(log).attestation)
    credential = att.rating_credential(a, log.service)
    assert credential["@context"] == ["https://www.w3.org/ns/credentials/v2"]
    assert credential["issuer"].startswith("did:key:z6Mk")
    assert credential["validFrom"] == a.computed_at
    assert credential["credentialSubject"]["id"] == f"urn:trustscore:agent:{log.agent.id}"
    assert credential["proof"]["cryptosuite"] == "eddsa-jcs-2022"
    text = msgspec.json.encode(credential)
    document = att.verify_rating_credential(msgspec.json.decode(text))
    assert document["credentialSubject"]["total"] == a.total
    changed = copy.deepcopy(credential)
    changed["credentialSubject"]["total"] = (a.total or 0) + 1
    with pytest.raises(SignatureError):
        att.verify_rating_credential(changed)
    with pytest.raises(SignatureError, match="issuer's key"):
        att.verify_rating_credential(credential, keys.SigningKey.generate().public_key)
    statements.parse_time(credential["proof"]["created"], what="created")


def test_the_reporters_vouch_is_part_of_the_rating(log: Log) -> None:
    """Without the entry that vouched for the reporter it has no standing: the numbers change."""
    bundle = build(log, "baseline-v0.3")
    a = att.parse_attestation(bundle.attestation)
    lying = resigned(bundle, log.service, evidence_entries=[i for i in a.evidence_entries if i != 7])
    data = as_json(lying)
    data["entries"] = [e for e in data["entries"] if e["index"] != 7]
    with pytest.raises(VerificationError, match=r"^total: attested [0-9]+, recomputed [0-9]+$"):
        att.verify_bundle(from_json(data), MODELS["baseline-v0.3"])


def test_the_attestation_names_the_derivation_it_was_derived_under(log: Log) -> None:
    """rating-attestation/v2 names the derivation's versions. A verifier deriving under others verifies it
    when the numbers reproduce (a derivation change touches few agents), and when one differs says why it
    may (an attestation signed before a release changed the derivation: work-evidence@2 made reported
    failures count)."""
    bundle = build(log, "baseline-v0.3")
    a = att.parse_attestation(bundle.attestation)
    assert isinstance(a, att.RatingAttestationV2) and a.derivation == DERIVATION
    summary = att.verify_bundle(bundle, MODELS["baseline-v0.3"]).summary()
    assert summary["derivation"] == summary["verifier_derivation"] == DERIVATION
    older = {**DERIVATION, "work_evidence": "work-evidence@1"}
    same = resigned(bundle, log.service, derivation=older)
    assert att.verify_bundle(same, MODELS["baseline-v0.3"]).summary()["derivation"] == older
    assert a.total is not None
    lying = resigned(bundle, log.service, derivation=older, total=a.total + 1)
    with pytest.raises(
        VerificationError,
        match=rf"^total: attested {a.total + 1}, recomputed {a.total}; the attested evidence was derived "
        r"under standing \S+, work_evidence work-evidence@1, this verifier derives under standing \S+, "
        r"work_evidence work-evidence@2: verify it with a release",
    ):
        att.verify_bundle(lying, MODELS["baseline-v0.3"])
    # the same derivation: the number alone
    with pytest.raises(VerificationError, match=rf"^total: attested {a.total + 1}, recomputed {a.total}$"):
        att.verify_bundle(resigned(bundle, log.service, total=a.total + 1), MODELS["baseline-v0.3"])


def test_a_v1_attestation_still_verifies_by_its_numbers(log: Log) -> None:
    """Bundles signed before v2 name no derivation: recomputed under the verifier's, as before."""
    bundle = build(log, "baseline-v0.3")
    v1 = resigned(bundle, log.service, v1=True)
    a = att.parse_attestation(v1.attestation)
    assert type(a) is att.RatingAttestation and a.derived_under is None
    assert att.verify_bundle(v1, MODELS["baseline-v0.3"]).summary()["derivation"] is None
    assert a.total is not None
    lying = resigned(bundle, log.service, v1=True, total=a.total + 1)
    with pytest.raises(VerificationError, match=f"^total: attested {a.total + 1}, recomputed {a.total}$"):
        att.verify_bundle(lying, MODELS["baseline-v0.3"])


@pytest.mark.parametrize(
    ("derivation", "words"),
    [
        ({}, "derivation must name 1..16 parts"),
        ({f"p{i}": "v" for i in range(17)}, "derivation must name 1..16 parts"),
        ({"standing": ""}, "derivation.standing must be"),
        ({"x" * 201: "v"}, "derivation part must be"),
    ],
)
def test_the_derivation_is_bounded(log: Log, derivation: dict[str, str], words: str) -> None:
    bundle = resigned(build(log), log.service, derivation=derivation)
    with pytest.raises(InvalidInput, match=words):
        att.parse_attestation(bundle.attestation)
