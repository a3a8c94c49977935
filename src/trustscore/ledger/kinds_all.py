"""Import this module to register every statement kind the server and verifiers must know.

Kinds register themselves when their module is imported; this module imports them all in one place:
agent cards, exam reports, party and service cards, settlements, marketplace events, graded evidence,
rating snapshots, re-verifications, exam sittings
the operator's marketplace approvals and work records, webhook subscriptions and their revocations.
"""

from __future__ import annotations

from typing import Any

from trustscore.exams.report import EXAM_REPORT
from trustscore.exams.sitting_kinds import SITTING_CLOSE, SITTING_OPEN, SITTING_REPORT, SITTING_REQUEST
from trustscore.ledger.approvals import MARKETPLACE_APPROVAL
from trustscore.ledger.cards import AGENT_CARD, AGENT_CARD_V2
from trustscore.ledger.events import EVENT
from trustscore.ledger.graded import GRADED_EVIDENCE
from trustscore.ledger.parties import PARTY_CARD
from trustscore.ledger.reverification import REVERIFICATION
from trustscore.ledger.service_card import SERVICE_CARD
from trustscore.ledger.settlements import SETTLEMENT
from trustscore.ledger.snapshots import RATING_SNAPSHOT
from trustscore.ledger.statements import Kind
from trustscore.ledger.subscriptions import SUBSCRIPTION, SUBSCRIPTION_REVOCATION
from trustscore.ledger.work_records import WORK_RECORD

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
    SUBSCRIPTION,
    SUBSCRIPTION_REVOCATION,
)

__all__ = ["ALL_KINDS"]
