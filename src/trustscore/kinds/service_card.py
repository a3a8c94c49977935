"""The service card: the server puts one of its own keys (grader, snapshot, re-verify) in the log.

The server's configuration decides which service keys it trusts; this kind only publishes the key so
that graded evidence and rating snapshots signed by it verify from the log alone. Self-signed; the
subject is the same as an agent card's.
"""

from __future__ import annotations

from typing import Literal

from trustscore import canonical
from trustscore.errors import InvalidInput
from trustscore.kinds.cards import card_subject
from trustscore.kinds.parties import check_public_key, new_nonce, now
from trustscore.ledger import keys, statements
from trustscore.ledger.statements import Facts, Kind, Predicate, Statement, check_text, register

ServiceRole = Literal["grader", "snapshot", "reverify"]


class ServiceCard(Predicate, kw_only=True, frozen=True):
    public_key: str  # base64 of the raw 32-byte Ed25519 key
    name: str
    roles: list[ServiceRole]


def _check(stmt: Statement, card: ServiceCard) -> Facts:
    public = check_public_key(card.public_key)
    if stmt.subject != [card_subject(public)]:
        raise InvalidInput("service card subject must be the id and SHA-256 of its public key")
    check_text(card.name, what="name")
    if not card.roles or len(set(card.roles)) != len(card.roles):
        raise InvalidInput("roles must be a non-empty list without repeats")
    service = keys.key_id(public)
    return Facts(signer=service, subject=service, introduces_key=public)


SERVICE_CARD = register(Kind(name="service-card", version=1, struct=ServiceCard, check=_check))


def make_service_card(
    public_key: bytes,
    name: str,
    roles: list[ServiceRole],
    *,
    nonce: str | None = None,
    issued_at: str | None = None,
) -> bytes:
    """Checked statement bytes of a service card; sign with the service key itself."""
    card = ServiceCard(
        nonce=nonce or new_nonce(),
        issued_at=issued_at or now(),
        public_key=canonical.b64encode(public_key),
        name=name,
        roles=roles,
    )
    payload = statements.make_statement(SERVICE_CARD, card_subject(public_key), card)
    statements.parse_statement(payload)
    return payload
