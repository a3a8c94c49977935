"""The party card: a counterparty or marketplace registers its key, like an agent card does.

Counterparties report settlements (``settlement/v1``) and marketplaces report events (``event/v1``);
both must first put their key in the log with this card. The subject, self-signature and optional
controller co-signature follow the agent card exactly (:mod:`trustscore.kinds.cards`). The small field
checks shared by the kinds of this milestone (key ids, digests, public keys) live here too.
"""

from __future__ import annotations

import datetime as dt
import re
import secrets
from typing import Literal

from trustscore import canonical
from trustscore.errors import InvalidInput
from trustscore.kinds.cards import card_subject, controller_facts
from trustscore.ledger import keys, statements
from trustscore.ledger.statements import Facts, Kind, Predicate, Statement, check_text, register

PartyRole = Literal["counterparty", "marketplace", "ci"]  # ci: confirms work records (evidence-ladder)
_SHA256_HEX = re.compile(r"[0-9a-f]{64}", re.ASCII)


class PartyCard(Predicate, kw_only=True, frozen=True):
    public_key: str  # base64 of the raw 32-byte Ed25519 key
    name: str
    role: PartyRole
    controller_key: str | None = None  # base64 key of an operator controlling this party; it co-signs


def check_public_key(text: str, *, what: str = "public_key") -> bytes:
    """The raw 32-byte Ed25519 key in base64 ``text``; raise naming ``what``."""
    public = canonical.b64decode(text, what=what)
    if len(public) != 32:
        raise InvalidInput(f"{what} must be a 32-byte Ed25519 key")
    return public


def check_key_id(text: str, *, what: str) -> str:
    """``text`` if it is a well-formed trustscore key id (``ts1_`` + 40 lowercase hex); raise otherwise."""
    if not keys.is_key_id(text) or text != text.lower():
        raise InvalidInput(f"{what} must be a trustscore key id (ts1_ + 40 lowercase hex)")
    return text


def check_sha256_hex(text: str, *, what: str) -> str:
    """``text`` if it is 64 lowercase hex digits (a SHA-256); raise otherwise."""
    if not _SHA256_HEX.fullmatch(text):
        raise InvalidInput(f"{what} must be 64 lowercase hex digits (a SHA-256)")
    return text


def new_nonce() -> str:
    return secrets.token_hex(16)


def now() -> str:
    return statements.format_time(dt.datetime.now(dt.UTC))


def _check(stmt: Statement, card: PartyCard) -> Facts:
    public = check_public_key(card.public_key)
    if stmt.subject != [card_subject(public)]:
        raise InvalidInput("party card subject must be the id and SHA-256 of its public key")
    check_text(card.name, what="name")
    party = keys.key_id(public)
    return Facts(
        signer=party,
        subject=party,
        introduces_key=public,
        cosigners=controller_facts(card.controller_key, public),
    )


PARTY_CARD = register(Kind(name="party-card", version=1, struct=PartyCard, check=_check))


def make_party_card(
    public_key: bytes,
    name: str,
    role: PartyRole,
    *,
    controller_key: bytes | None = None,
    nonce: str | None = None,
    issued_at: str | None = None,
) -> bytes:
    """Checked statement bytes of a party card; sign with the party's key (and the controller's, if any)."""
    card = PartyCard(
        nonce=nonce or new_nonce(),
        issued_at=issued_at or now(),
        public_key=canonical.b64encode(public_key),
        name=name,
        role=role,
        controller_key=None if controller_key is None else canonical.b64encode(controller_key),
    )
    payload = statements.make_statement(PARTY_CARD, card_subject(public_key), card)
    statements.parse_statement(payload)
    return payload
