"""The operator's approval of a marketplace key: ``marketplace-approval/v1`` (docs/evidence-mapping.md).

Anyone can register a marketplace key with a party card; only the operator decides whose events count at
full weight. The operator signs with the log key (the log's one trust anchor, already needed to verify
checkpoints), naming it as ``operator``. ``approve`` admits the marketplace's events from the next entry
on; ``retire`` ends that (events already logged keep the weight they were derived with). Events of a
marketplace that is not approved count only through the no-standing pool (evidence/standing.py).
"""

from __future__ import annotations

import hashlib
from typing import Literal

from trustscore.errors import InvalidInput
from trustscore.kinds.parties import check_key_id, new_nonce, now
from trustscore.ledger import statements
from trustscore.ledger.statements import Facts, Kind, Predicate, Statement, Subject, register

Action = Literal["approve", "retire"]


class MarketplaceApproval(Predicate, kw_only=True, frozen=True):
    operator: str  # key id of the log key; the signer
    marketplace: str  # key id of the registered marketplace; the subject
    action: Action


def approval_subject(marketplace: str) -> Subject:
    return Subject(name=marketplace, digest={"sha256": hashlib.sha256(marketplace.encode()).hexdigest()})


def _check(stmt: Statement, a: MarketplaceApproval) -> Facts:
    check_key_id(a.operator, what="operator")
    check_key_id(a.marketplace, what="marketplace")
    if stmt.subject != [approval_subject(a.marketplace)]:
        raise InvalidInput("marketplace-approval subject must name the marketplace")
    return Facts(signer=a.operator, subject=a.marketplace)


MARKETPLACE_APPROVAL = register(
    Kind(name="marketplace-approval", version=1, struct=MarketplaceApproval, check=_check)
)


def make_approval(*, operator: str, marketplace: str, action: Action, nonce: str | None = None) -> bytes:
    """Checked statement bytes of an approval or retirement; sign with the log key."""
    a = MarketplaceApproval(
        nonce=nonce or new_nonce(), issued_at=now(), operator=operator, marketplace=marketplace, action=action
    )
    payload = statements.make_statement(MARKETPLACE_APPROVAL, approval_subject(marketplace), a)
    statements.parse_statement(payload)
    return payload
