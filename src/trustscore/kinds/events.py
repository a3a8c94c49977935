"""The marketplace event: a marketplace reports something that happened with an agent.

Signed by the marketplace's key (named in the predicate, so the check knows the signer); about the agent.
Only the service, with the store, can check that the signer's party card has the ``marketplace`` role.
See docs/evidence-mapping.md for the evidence each event becomes.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from trustscore.errors import InvalidInput
from trustscore.kinds.parties import check_key_id, new_nonce, now
from trustscore.ledger import statements
from trustscore.ledger.statements import Facts, Kind, Predicate, Statement, Subject, check_text, register

EventName = Literal[
    "delivered", "confirmed", "rejected", "delivery_failed", "negotiation_expired", "signature_invalid"
]

#: Bytes of a POSTed event envelope (the largest legal one, four signatures, every character escaped,
#: is ~5 KB).
MAX_EVENT_BYTES = 64 * 1024


class Event(Predicate, kw_only=True, frozen=True):
    marketplace: str  # key id of the marketplace; the signer
    agent: str  # key id of the agent the event is about
    event: EventName
    ref: str  # the marketplace's id of the deal or order
    occurred_at: str


def event_subject(agent: str, ref: str) -> Subject:
    return Subject(name=agent, digest={"sha256": hashlib.sha256(ref.encode("utf-8")).hexdigest()})


def _check(stmt: Statement, e: Event) -> Facts:
    check_key_id(e.marketplace, what="marketplace")
    check_key_id(e.agent, what="agent")
    if e.marketplace == e.agent:
        raise InvalidInput("agent must differ from marketplace (self-reporting)")
    check_text(e.ref, what="ref")
    statements.parse_time(e.occurred_at, what="occurred_at")
    if stmt.subject != [event_subject(e.agent, e.ref)]:
        raise InvalidInput("event subject must be the agent id and the SHA-256 of ref")
    return Facts(signer=e.marketplace, subject=e.agent)


EVENT = register(Kind(name="event", version=1, struct=Event, check=_check))


def make_event(
    *,
    marketplace: str,
    agent: str,
    event: EventName,
    ref: str,
    occurred_at: str,
    nonce: str | None = None,
    issued_at: str | None = None,
) -> bytes:
    """Checked statement bytes of a marketplace event; sign with the marketplace's key."""
    e = Event(
        nonce=nonce or new_nonce(),
        issued_at=issued_at or now(),
        marketplace=marketplace,
        agent=agent,
        event=event,
        ref=ref,
        occurred_at=occurred_at,
    )
    payload = statements.make_statement(EVENT, event_subject(agent, ref), e)
    statements.parse_statement(payload)
    return payload
