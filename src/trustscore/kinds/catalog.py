"""Import this module to register every statement kind the server and verifiers must know.

Kinds register themselves when their module is imported; this module imports them all in one place:
agent cards, exam reports, party and service cards, settlements, marketplace events, graded evidence,
rating snapshots, re-verifications, exam sittings
the operator's marketplace approvals and work records, webhook subscriptions and their revocations.
"""

from __future__ import annotations

from typing import Any

from trustscore.kinds.approvals import MARKETPLACE_APPROVAL
from trustscore.kinds.cards import AGENT_CARD, AGENT_CARD_V2
from trustscore.kinds.events import EVENT
from trustscore.kinds.exam_report import EXAM_REPORT
from trustscore.kinds.graded import GRADED_EVIDENCE
from trustscore.kinds.parties import PARTY_CARD
from trustscore.kinds.reverification import REVERIFICATION
from trustscore.kinds.scope_run import SCOPE_RUN
from trustscore.kinds.service_card import SERVICE_CARD
from trustscore.kinds.settlements import SETTLEMENT
from trustscore.kinds.sittings import SITTING_CLOSE, SITTING_OPEN, SITTING_REPORT, SITTING_REQUEST
from trustscore.kinds.snapshots import RATING_SNAPSHOT
from trustscore.kinds.subscriptions import SUBSCRIPTION, SUBSCRIPTION_REVOCATION
from trustscore.kinds.work_records import WORK_RECORD
from trustscore.ledger.statements import Kind

ALL_KINDS: tuple[Kind[Any], ...] = (
    AGENT_CARD,
    AGENT_CARD_V2,
    EXAM_REPORT,
    PARTY_CARD,
    SERVICE_CARD,
    SETTLEMENT,
    EVENT,
    GRADED_EVIDENCE,
    RATING_SNAPSHOT,
    REVERIFICATION,
    SITTING_REQUEST,
    SITTING_OPEN,
    SITTING_REPORT,
    SITTING_CLOSE,
    MARKETPLACE_APPROVAL,
    WORK_RECORD,
    SCOPE_RUN,
    SUBSCRIPTION,
    SUBSCRIPTION_REVOCATION,
)

__all__ = ["ALL_KINDS"]
