"""Every row of the evidence mapping (docs/evidence-mapping.md), from real signed log entries."""

from __future__ import annotations

import datetime as dt
import json

import pytest

from tests.unit.evidence.signed import (
    DIGEST,
    T0,
    T1,
    T2,
    Log,
    TrustAll,
    busy_log,
    graded,
    new_id,
    payload_of,
    settlement,
)
from trustscore.errors import UnsupportedKind
from trustscore.evidence import Context, DerivedEvidence, derive, derive_log, derive_snapshots
from trustscore.evidence.derive import NO_EVIDENCE
from trustscore.kinds.events import EventName, make_event
from trustscore.kinds.graded import Tier
from trustscore.kinds.settlements import details_commitment
from trustscore.kinds.snapshots import SnapshotRow, make_rating_snapshot
from trustscore.ledger import dsse, statements
from trustscore.scoring.inputs import EvidenceItem, Snapshot

AT0 = dt.datetime(2026, 3, 1, 12, tzinfo=dt.UTC)
AT1 = AT0 + dt.timedelta(days=1)


def fixed(weight: float) -> Context:
    """Every reporter weighs ``weight`` and has standing (the pool is tested in test_standing.py)."""
    return Context(reporter_weight=lambda _reporter, _index: weight, standing=TrustAll())


def parse(payload: bytes) -> statements.ParsedStatement:
    return statements.parse_statement(payload)


@pytest.mark.parametrize(("tier", "source"), [("public", "real-benchmark"), ("private", "verified")])
def test_graded_evidence_becomes_one_first_party_item_per_graded_item(tier: Tier, source: str) -> None:
    agent = new_id()
    out = derive(7, parse(graded(agent, tier)), fixed(0.9))
    assert out == [
        DerivedEvidence(
            index=7,
            agent=agent,
            dimension="capability",
            source=source,
            at=AT0,
            value=0.85,
            result="success",
            key="exam:capability@2:c1",
        ),
        DerivedEvidence(
            index=7,
            agent=agent,
            dimension="integrity",
            source=source,
            at=AT0,
            value=0.0,
            result="failure",
            key="exam:capability@2:i1",
        ),
    ]
    assert all(d.issuer is None and d.extra_weight == 1.0 for d in out)


@pytest.mark.parametrize(
    ("delivery", "value", "result"),
    [("pass", 1.0, "success"), ("late", 0.5, "partial"), ("fail", 0.0, "failure")],
)
def test_buyer_reported_delivery(delivery: str, value: float, result: str) -> None:
    seller, buyer = new_id(), new_id()
    [d] = derive(4, parse(settlement(seller, buyer, delivery=delivery)), fixed(0.75))
    assert d == DerivedEvidence(
        index=4,
        agent=seller,
        dimension="delivery",
        source="real",
        at=AT0,
        value=value,
        result=result,  # type: ignore[arg-type]
        key=f"settlement:{buyer}:d1:delivery",
        issuer=buyer,
        extra_weight=0.75,
    )


@pytest.mark.parametrize(("payment", "value", "result"), [("pass", 1.0, "success"), ("fail", 0.5, "partial")])
def test_seller_reported_payment(payment: str, value: float, result: str) -> None:
    seller, buyer = new_id(), new_id()
    payload = settlement(seller, buyer, reporter_role="seller", payment=payment)
    [d] = derive(4, parse(payload), fixed(0.5))
    assert (d.agent, d.dimension, d.value, d.result, d.issuer) == (
        buyer,
        "reliability",
        value,
        result,
        seller,
    )
    assert d.key == f"settlement:{seller}:d1:reliability"


def test_confirmed_is_economic_success_for_the_party_reported_about() -> None:
    seller, buyer = new_id(), new_id()
    out = derive(1, parse(settlement(seller, buyer, delivery="late", confirmed=True)), fixed(0.6))
    assert [(d.agent, d.dimension, d.value, d.result) for d in out] == [
        (seller, "delivery", 0.5, "partial"),
        (seller, "economic", 1.0, "success"),
    ]
    [d] = derive(1, parse(settlement(seller, buyer, reporter_role="seller", confirmed=True)), fixed(0.6))
    assert (d.agent, d.dimension, d.key, d.extra_weight) == (
        buyer,
        "economic",
        f"settlement:{seller}:d1:economic",
        0.6,
    )


def test_confidential_settlements_are_real_confidential() -> None:
    seller, buyer = new_id(), new_id()
    payload = settlement(
        seller,
        buyer,
        delivery="pass",
        confirmed=True,
        confidential=True,
        details_commitment=details_commitment({}),
    )
    assert {d.source for d in derive(0, parse(payload), fixed(0.5))} == {"real-confidential"}


def test_settlement_weight_comes_from_the_context_with_the_reporter_and_index() -> None:
    seller, buyer = new_id(), new_id()
    calls: list[tuple[str, int]] = []

    def weight(reporter: str, index: int) -> float:
        calls.append((reporter, index))
        return 0.8

    context = Context(reporter_weight=weight, standing=TrustAll())
    [d] = derive(12, parse(settlement(seller, buyer, delivery="pass")), context)
    assert calls == [(buyer, 12)]
    assert d.extra_weight == 0.8


def test_the_default_context_gives_no_reporter_standing() -> None:
    """Issue #10: with no standing evidence about the subject, a reporter without standing adds nothing."""
    assert derive(0, parse(settlement(new_id(), new_id(), delivery="pass")), Context()) == []


@pytest.mark.parametrize(
    ("event", "dimension", "result", "source"),
    [
        ("delivered", "delivery", "success", "real"),
        ("rejected", "delivery", "failure", "real"),
        ("confirmed", "economic", "success", "real-confidential"),
        ("delivery_failed", "reliability", "failure", "real"),
        ("negotiation_expired", "negotiation", "failure", "real"),
        ("signature_invalid", "integrity", "failure", "real"),
    ],
)
def test_marketplace_events(event: EventName, dimension: str, result: str, source: str) -> None:
    market, agent = new_id(), new_id()
    payload = make_event(marketplace=market, agent=agent, event=event, ref="o-9", occurred_at=T1)
    [d] = derive(3, parse(payload), fixed(0.5))
    assert d == DerivedEvidence(
        index=3,
        agent=agent,
        dimension=dimension,
        source=source,
        at=AT1,
        value=1.0 if result == "success" else 0.0,
        result=result,  # type: ignore[arg-type]
        key=f"event:{market}:o-9:{dimension}",
        issuer=market,
        extra_weight=0.5,  # an unrated marketplace counts like an unrated counterparty
    )


def test_snapshots_become_engine_snapshots_and_no_evidence() -> None:
    a, b = sorted([new_id(), new_id()])
    rows = [SnapshotRow(agent=a, total=640, adjusted=600), SnapshotRow(agent=b, total=None, adjusted=None)]
    stmt = parse(
        make_rating_snapshot(
            signer=new_id(),
            model_version="trustscore-v1",
            weights_digest=DIGEST,
            log_size=5,
            taken_at=T2,
            ratings=rows,
        )
    )
    assert derive(9, stmt, Context()) == []
    at = AT0 + dt.timedelta(days=2)
    assert derive_snapshots(stmt) == [
        Snapshot(agent=a, at=at, total=640, model_version="trustscore-v1"),
        Snapshot(agent=b, at=at, total=None, model_version="trustscore-v1"),
    ]
    assert derive_snapshots(parse(settlement(a, b, delivery="pass"))) == []


def test_cards_carry_no_evidence() -> None:
    log = Log()
    log.party("p")
    log.party("m", "marketplace")
    log.service("s", ["grader"])
    assert [derive(i, s, Context()) for i, s in log.parsed()] == [[], [], []]
    assert f"{statements.PREDICATE_PREFIX}exam-report/v1" in NO_EVIDENCE


def test_a_kind_without_a_mapping_row_is_refused() -> None:
    stmt = parse(settlement(new_id(), new_id(), delivery="pass"))
    unmapped = statements.Kind(name="mystery", version=1, struct=statements.Predicate, check=stmt.kind.check)
    odd = statements.ParsedStatement(
        stmt.statement, unmapped, statements.Predicate(nonce="n" * 16, issued_at=T0), stmt.facts
    )
    with pytest.raises(UnsupportedKind, match="mystery/v1"):
        derive(0, odd, Context())


def test_to_item_keeps_every_field() -> None:
    [d] = derive(2, parse(settlement(new_id(), new_id(), delivery="late")), fixed(0.7))
    assert d.to_item() == EvidenceItem(
        agent=d.agent,
        dimension="delivery",
        source="real",
        at=AT0,
        value=0.5,
        result="partial",
        key=d.key,
        issuer=d.issuer,
        extra_weight=0.7,
    )


def test_derive_log_weights_each_report_as_of_its_index() -> None:
    log = busy_log()
    out = derive_log(log.parsed(), TrustAll())
    weights = [(d.index, d.dimension, d.extra_weight) for d in out.evidence if d.issuer is not None]
    assert weights == [
        (4, "delivery", 0.5),  # before any snapshot: unrated
        (4, "economic", 0.5),
        (6, "delivery", 0.8),  # buyer adjusted 600 -> 0.5 + 0.5 * 0.6
        (7, "reliability", 0.7),  # seller: adjusted null, total 400
        (8, "delivery", 0.5),  # an unrated marketplace weighs like an unrated counterparty
    ]
    assert [s.total for s in out.snapshots] == [r.total for r in log.entries[5].statement.predicate.ratings]  # type: ignore[attr-defined]


def test_derivation_is_deterministic() -> None:
    log = busy_log()
    first = derive_log(log.parsed())
    assert derive_log(log.parsed()) == first
    # The same statements re-read from the stored leaf bytes give the same evidence.
    again = [
        (i, parse(payload_of(dsse.decode_envelope(json.loads(e.leaf))))) for i, e in enumerate(log.entries)
    ]
    assert derive_log(again) == first
