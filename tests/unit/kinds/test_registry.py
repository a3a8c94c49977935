"""``kinds_all`` registers every statement kind the server and verifiers must know."""

from __future__ import annotations

from trustscore.kinds import catalog as kinds_all
from trustscore.ledger import statements


def test_kinds_all_registers_every_kind() -> None:
    names = {f"{k.name}/v{k.version}" for k in kinds_all.ALL_KINDS}
    assert names == {
        "agent-card/v1",
        "agent-card/v2",
        "exam-report/v1",
        "party-card/v1",
        "service-card/v1",
        "settlement/v1",
        "event/v1",
        "graded-evidence/v1",
        "rating-snapshot/v1",
        "reverification/v1",
        "sitting-request/v1",
        "sitting-open/v1",
        "sitting-report/v1",
        "sitting-close/v1",
        "marketplace-approval/v1",
        "work-record/v1",
        "scope-run/v1",
        "subscription/v1",
        "subscription-revocation/v1",
    }
    registered = statements.kinds()
    for kind in kinds_all.ALL_KINDS:
        assert registered[kind.predicate_type] is kind
