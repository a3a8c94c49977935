"""The agent card: an agent registers its key, name and what it declares about itself."""

from __future__ import annotations

import hashlib

import msgspec

from trustscore import canonical
from trustscore.errors import InvalidInput
from trustscore.ledger import keys
from trustscore.ledger.statements import (
    Facts,
    Kind,
    Predicate,
    Statement,
    Subject,
    check_text,
    check_url,
    register,
)

MAX_CAPABILITIES = 64


class AgentCard(Predicate, kw_only=True, frozen=True):
    public_key: str  # base64 of the raw 32-byte Ed25519 key
    name: str
    endpoint: str | None = None
    model: str | None = None
    model_version: str | None = None
    capabilities: list[str] = msgspec.field(default_factory=list)
    controller_key: str | None = None  # base64 key of an operator controlling this agent; it co-signs


def controller_facts(controller_key: str | None, own: bytes) -> tuple[tuple[str, bytes], ...]:
    """The co-signer a card with ``controller_key`` needs: the controller itself (never the card's key)."""
    if controller_key is None:
        return ()
    key = canonical.b64decode(controller_key, what="controller_key")
    if len(key) != 32:
        raise InvalidInput("controller_key must be a 32-byte Ed25519 key")
    if key == own:
        raise InvalidInput("controller_key must differ from the card's own key")
    return ((keys.key_id(key), key),)


def card_subject(public_key: bytes) -> Subject:
    return Subject(name=keys.key_id(public_key), digest={"sha256": hashlib.sha256(public_key).hexdigest()})


def _check_card(stmt: Statement, card: AgentCard) -> Facts:
    public = canonical.b64decode(card.public_key, what="public_key")
    if len(public) != 32:
        raise InvalidInput("public_key must be a 32-byte Ed25519 key")
    if stmt.subject != [card_subject(public)]:
        raise InvalidInput("agent card subject must be the id and SHA-256 of its public key")
    check_text(card.name, what="name")
    if card.endpoint is not None:
        check_url(card.endpoint, what="endpoint")
    for field, value in (("model", card.model), ("model_version", card.model_version)):
        if value is not None:
            check_text(value, what=field)
    if len(card.capabilities) > MAX_CAPABILITIES:
        raise InvalidInput(f"at most {MAX_CAPABILITIES} capabilities")
    for c in card.capabilities:
        check_text(c, what="capability", max_len=100)
    agent = keys.key_id(public)
    return Facts(
        signer=agent,
        subject=agent,
        introduces_key=public,
        cosigners=controller_facts(card.controller_key, public),
    )


AGENT_CARD = register(Kind(name="agent-card", version=1, struct=AgentCard, check=_check_card))
