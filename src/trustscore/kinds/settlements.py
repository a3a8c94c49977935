"""The settlement: one party to a deal reports how the other side performed.

A buyer reports the seller's ``delivery``; a seller reports the buyer's ``payment``; either may say the
trade closed economically (``confirmed``). The statement is signed by the reporter and is about the
other party. A confidential settlement keeps its details private but anchors them with a SHA-256
commitment; a public one may carry them. Self-dealing by one key is refused here; two keys under one
controller can only be spotted with the cards in the store, which :func:`same_controller` decides.
See docs/evidence-mapping.md for the evidence a settlement becomes.
"""

from __future__ import annotations

import hashlib
from typing import Literal

from trustscore import canonical
from trustscore.errors import InvalidInput
from trustscore.kinds.parties import check_key_id, check_sha256_hex, new_nonce, now
from trustscore.ledger import keys, statements
from trustscore.ledger.statements import Facts, Kind, Predicate, Statement, Subject, check_text, register

ReporterRole = Literal["buyer", "seller"]
Delivery = Literal["pass", "late", "fail"]
Payment = Literal["pass", "fail"]
MAX_DETAILS = 64
#: Bytes of a POSTed settlement envelope: the largest legal one (64 details of 100 + 2,000 characters
#: beyond the BMP, each escaped as a 12-byte surrogate pair as Python's json.dumps does, four signatures)
#: is ~2.16 MB (tests/unit/kinds/test_envelope_limits.py).
MAX_SETTLEMENT_BYTES = 3 * 1024 * 1024


class Settlement(Predicate, kw_only=True, frozen=True):
    deal_id: str
    seller: str  # key id
    buyer: str  # key id
    reporter_role: ReporterRole
    delivery: Delivery | None = None  # the seller's delivery; only a buyer reports it
    payment: Payment | None = None  # the buyer's payment; only a seller reports it
    confirmed: bool = False  # the trade closed economically
    confidential: bool = False
    details_commitment: str | None = None  # SHA-256 hex of the private details; required if confidential
    details: dict[str, str] | None = None  # only when not confidential
    settled_at: str

    @property
    def reporter(self) -> str:
        return self.buyer if self.reporter_role == "buyer" else self.seller

    @property
    def about(self) -> str:
        """The party the report is about: the one that is not the reporter."""
        return self.seller if self.reporter_role == "buyer" else self.buyer


def settlement_subject(about: str, deal_id: str) -> Subject:
    return Subject(name=about, digest={"sha256": hashlib.sha256(deal_id.encode("utf-8")).hexdigest()})


def _check(stmt: Statement, s: Settlement) -> Facts:
    check_text(s.deal_id, what="deal_id")
    check_key_id(s.seller, what="seller")
    check_key_id(s.buyer, what="buyer")
    if s.seller == s.buyer:
        raise InvalidInput("seller and buyer must differ (self-dealing)")
    if s.delivery is not None and s.reporter_role != "buyer":
        raise InvalidInput("delivery is reported by the buyer only")
    if s.payment is not None and s.reporter_role != "seller":
        raise InvalidInput("payment is reported by the seller only")
    if s.delivery is None and s.payment is None and not s.confirmed:
        raise InvalidInput("a settlement must report delivery, payment or confirmed")
    if s.details_commitment is not None:
        check_sha256_hex(s.details_commitment, what="details_commitment")
    if s.confidential:
        if s.details_commitment is None:
            raise InvalidInput("details_commitment is required when confidential")
        if s.details is not None:
            raise InvalidInput("details must be absent when confidential (commit to them instead)")
    if s.details is not None:
        if len(s.details) > MAX_DETAILS:
            raise InvalidInput(f"details: at most {MAX_DETAILS} entries")
        for k, v in s.details.items():
            check_text(k, what="details key", max_len=100)
            check_text(v, what=f"details[{k!r}]", max_len=2000)
    statements.parse_time(s.settled_at, what="settled_at")
    if stmt.subject != [settlement_subject(s.about, s.deal_id)]:
        raise InvalidInput("settlement subject must be the other party's id and the SHA-256 of deal_id")
    return Facts(signer=s.reporter, subject=s.about)


SETTLEMENT = register(Kind(name="settlement", version=1, struct=Settlement, check=_check))


def details_commitment(details: dict[str, str]) -> str:
    """A suggested commitment to private details: SHA-256 hex of their canonical JSON.

    Add a secret salt entry to low-entropy details so the commitment cannot be brute-forced.
    """
    return hashlib.sha256(canonical.encode(details)).hexdigest()


def make_settlement(
    *,
    deal_id: str,
    seller: str,
    buyer: str,
    reporter_role: ReporterRole,
    settled_at: str,
    delivery: Delivery | None = None,
    payment: Payment | None = None,
    confirmed: bool = False,
    confidential: bool = False,
    details_commitment: str | None = None,
    details: dict[str, str] | None = None,
    nonce: str | None = None,
    issued_at: str | None = None,
) -> bytes:
    """Checked statement bytes of a settlement; sign with the reporter's key."""
    s = Settlement(
        nonce=nonce or new_nonce(),
        issued_at=issued_at or now(),
        deal_id=deal_id,
        seller=seller,
        buyer=buyer,
        reporter_role=reporter_role,
        delivery=delivery,
        payment=payment,
        confirmed=confirmed,
        confidential=confidential,
        details_commitment=details_commitment,
        details=details,
        settled_at=settled_at,
    )
    payload = statements.make_statement(SETTLEMENT, settlement_subject(s.about, deal_id), s)
    statements.parse_statement(payload)
    return payload


def _controller_id(controller: str | None) -> str | None:
    """A card's ``controller_key`` (base64 key) or an already-derived controller id, as an id."""
    if controller is None or keys.is_key_id(controller):
        return controller
    key = canonical.b64decode(controller, what="controller_key")
    return keys.key_id(key)


def same_controller(
    seller_card_controller: str | None,
    buyer_card_controller: str | None,
    seller_id: str,
    buyer_id: str,
) -> bool:
    """Whether seller and buyer are one interest: the same key, the same controller, or one controls
    the other. Controllers are the cards' ``controller_key`` values (base64) or their key ids; None
    when a card names no controller. The service refuses a settlement for which this is True.
    """
    seller_ctl = _controller_id(seller_card_controller)
    buyer_ctl = _controller_id(buyer_card_controller)
    if seller_id == buyer_id:
        return True
    if seller_ctl is not None and seller_ctl in (buyer_ctl, buyer_id):
        return True
    return buyer_ctl is not None and buyer_ctl == seller_id
