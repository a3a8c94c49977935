"""Admission and evidence of reverification/v1, as admission.py and derive.py will call them."""

from __future__ import annotations

import pytest

from tests.unit.reverify.kit import AGENT, VERIFIER, item, matching, payload, private
from trustscore.errors import InvalidInput, UnknownSigner
from trustscore.exams.loader import DEFAULT_PUBLIC_DIR
from trustscore.kinds.admission import Registration
from trustscore.kinds.admission import admit_reverification as admit_rule
from trustscore.kinds.reverification.security import SecurityState
from trustscore.ledger import statements
from trustscore.reverify.evidence import ISSUER, derive_reverification, is_asked
from trustscore.scoring.weights import load_weights

WEIGHTS = DEFAULT_PUBLIC_DIR.parent / "weights"


def _lookup(*regs: Registration):  # type: ignore[no-untyped-def]
    found = {r.id: r for r in regs}
    return found.get


AGENT_REG = Registration(AGENT.id, AGENT.public_key, "agent")


@pytest.mark.parametrize("roles", [("reverify",), ("grader", "reverify", "snapshot")])
def test_admitted_when_signed_by_a_reverify_service_key(roles: tuple[str, ...]) -> None:
    stmt = statements.parse_statement(payload())
    admit_rule(
        stmt, _lookup(Registration(VERIFIER.id, VERIFIER.public_key, "service", None, roles), AGENT_REG)
    )


def test_refused_without_the_reverify_role_or_registrations() -> None:
    stmt = statements.parse_statement(payload())
    grader = Registration(VERIFIER.id, VERIFIER.public_key, "service", None, ("grader",))
    with pytest.raises(InvalidInput, match="no reverify role"):
        admit_rule(stmt, _lookup(grader, AGENT_REG))
    market = Registration(VERIFIER.id, VERIFIER.public_key, "marketplace")
    with pytest.raises(InvalidInput, match="registered as marketplace"):
        admit_rule(stmt, _lookup(market, AGENT_REG))
    with pytest.raises(UnknownSigner, match="re-verifier"):
        admit_rule(stmt, _lookup(AGENT_REG))
    verifier = Registration(VERIFIER.id, VERIFIER.public_key, "service", None, ("reverify",))
    with pytest.raises(UnknownSigner, match="agent"):
        admit_rule(stmt, _lookup(verifier))


def _derive(**kw: object):  # type: ignore[no-untyped-def]
    return derive_reverification(42, statements.parse_statement(payload(**kw)))  # type: ignore[arg-type]


def test_the_issuer_is_the_one_the_released_weights_exempt() -> None:
    spec = load_weights(WEIGHTS / "trustscore-v1.toml").spec
    assert spec.issuers is not None and ISSUER in spec.issuers.exempt


def test_a_match_is_one_integrity_item_per_report() -> None:
    [ev] = _derive(items=[*matching(9), item("x", 1000, 900)])
    assert (ev.index, ev.agent, ev.dimension, ev.source, ev.issuer) == (
        42,
        AGENT.id,
        "integrity",
        "verified",
        ISSUER,
    )
    assert (ev.value, ev.result, ev.key) == (1.0, "success", "reverify:standing:capability@1")
    assert ev.at.isoformat() == "2026-03-01T12:00:00+00:00"


def test_a_mismatch_counts_against_integrity_twice_and_persists() -> None:
    standing, strike = _derive(items=matching(5) + matching(5, observed=0, prefix="j"))
    assert (standing.key, standing.value, standing.result) == (
        "reverify:standing:capability@1",
        0.5,
        "partial",
    )
    assert strike.key is not None and strike.key.startswith("reverify:mismatch:5:")
    assert (strike.value, strike.result) == (0.0, "failure")
    [low, _] = _derive(items=matching(10, observed=0))
    assert (low.value, low.result) == (0.0, "failure")


def test_an_unreachable_endpoint_is_not_a_silent_pass() -> None:
    [ev] = _derive(items=[item("i", 1000, None)], private_items=[private("p", None)])
    assert (ev.key, ev.value, ev.result) == ("reverify:standing:capability@1", 0.0, "failure")


def test_private_items_are_verified_evidence_in_their_dimensions() -> None:
    evs = _derive(private_items=[private("p-1", 1000, "capability"), private("p-2", 500, "security")])
    assert evs[1].key == "reverify:private-gap:capability@1" and evs[1].result == "success"  # gap 250
    assert [(e.dimension, e.value, e.result, e.key, e.source) for e in evs[2:]] == [
        ("capability", 1.0, "success", "reverify:private:probe@1:p-1", "verified"),
        ("security", 0.5, "partial", "reverify:private:probe@1:p-2", "verified"),
    ]
    assert [is_asked(e.issuer, e.key) for e in evs] == [False, False, True, True]


def test_a_failed_probe_counts_in_every_run() -> None:
    """standing-v5: a failed probe is evidence whatever the status (under v4 it was held back while it only
    started a downgrade streak, and a passing run reset the streak: failures between passes never counted;
    adversarial audit, 2026-12-08). The status still waits for DOWNGRADE_RUNS failures in a row."""
    probes = [private("p-1", 0), private("p-2", 1000, "capability")]
    for before in (SecurityState("passed", 0), SecurityState("passed", 2)):
        evs = _derive(private_items=probes, before=before)
        assert [e.dimension for e in evs] == ["integrity", "integrity", "security", "capability"]


def test_derive_refuses_other_kinds() -> None:
    from tests.unit.evidence.signed import graded

    with pytest.raises(InvalidInput, match="not a re-verification"):
        derive_reverification(0, statements.parse_statement(graded(AGENT.id)))


def test_one_standing_item_per_exam_version_whatever_the_report() -> None:
    """Issue #10: each re-signed copy of a report used to add its own standing integrity item."""
    keys = {_derive(report_index=i, checkpoint_size=i + 2)[0].key for i in (5, 9, 14)}
    assert keys == {"reverify:standing:capability@1"}
    assert _derive(exam_version=2)[0].key == "reverify:standing:capability@2"
