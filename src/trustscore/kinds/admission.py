"""Who may put what into the log: the role rules every statement must pass, purely.

Signatures prove who signed; admission decides whether that signer may say this. The same rules run
at ingest (against the registrations in the database) and over an exported log offline (against the
registrations seen so far in log order), so anyone can re-derive which statements count.

Rules (docs/evidence-mapping.md):
- a card registers its key once: its type (agent, counterparty, marketplace, service), controller and
  service roles never change afterwards (names and endpoints may);
- service cards must be co-signed by the log key, so the log's verifier key is the only trust anchor;
- an exam report's signer must be a registered agent;
- graded evidence must be signed by a service key with the ``grader`` role, about a registered agent;
- rating snapshots must be signed by a service key with the ``snapshot`` role;
- a settlement's two parties must be registered non-service parties and not one interest
  (the same key, the same controller, or one controlling the other);
- an event must be signed by a registered marketplace, about a registered agent of another interest;
- a re-verification must be signed by a service key with the ``reverify`` role, about a registered agent;
- ``sitting-request`` and ``sitting-report``: the signer is a registered agent; ``sitting-open`` and
  ``sitting-close``: the signer is a service key with the ``grader`` role, the subject a registered agent;
- a work record: its agent is a registered agent; ``attestation: self`` is signed by the agent or a key
  of the same interest (a harness or the agent's own CI acting for it), ``attestation: confirmed`` by a
  registered counterparty, marketplace or CI party (party card role ``ci``) of another interest
  (docs/evidence-ladder.md).
- a scope run (``kinds/scope_run.py``): as a re-verification, signed by a ``reverify`` service key.
- a webhook subscription or its revocation must be signed by its subscriber, a registered non-service
  key (kinds/subscriptions.py; that a revocation's signer owns the subscription is checked where it is
  applied, store/webhooks.py);
- a marketplace approval or retirement must be signed by the log key (the operator), about a registered
  marketplace.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from trustscore.canonical import b64decode
from trustscore.errors import InvalidInput, SignatureError, UnknownSigner
from trustscore.kinds.cards import AgentCard
from trustscore.kinds.parties import PartyCard
from trustscore.kinds.service_card import ServiceCard
from trustscore.kinds.settlements import Settlement
from trustscore.kinds.sittings import SITTING_KINDS
from trustscore.kinds.subscriptions import SUBSCRIPTION_KINDS
from trustscore.kinds.work_records import WorkRecord
from trustscore.ledger import keys
from trustscore.ledger.statements import ParsedStatement


@dataclass(frozen=True)
class Registration:
    """What the log knows about a registered key."""

    id: str
    public_key: bytes
    kind: str  # agent | counterparty | marketplace | service
    controller: str | None = None  # key id of the controller that co-signed the card
    roles: tuple[str, ...] = ()  # service roles


Lookup = Callable[[str], Registration | None]


def _controller_id(controller_key: str | None) -> str | None:
    if controller_key is None:
        return None
    return keys.key_id(b64decode(controller_key, what="controller_key"))


def registration_of(stmt: ParsedStatement) -> Registration | None:
    """The registration a card statement makes, or None for other kinds."""
    p = stmt.predicate
    public = stmt.facts.introduces_key
    if public is None:
        return None
    if isinstance(p, AgentCard):
        return Registration(stmt.facts.subject, public, "agent", _controller_id(p.controller_key))
    if isinstance(p, PartyCard):
        return Registration(stmt.facts.subject, public, str(p.role), _controller_id(p.controller_key))
    if isinstance(p, ServiceCard):
        return Registration(stmt.facts.subject, public, "service", None, tuple(sorted(set(p.roles))))
    raise InvalidInput(f"{stmt.kind.name} introduces a key but is not a known card kind")


def _registered(lookup: Lookup, kid: str, what: str, kinds: Sequence[str] | None = None) -> Registration:
    reg = lookup(kid)
    if reg is None:
        raise UnknownSigner(f"{what} {kid} is not registered")
    if kinds is not None and reg.kind not in kinds:
        raise InvalidInput(f"{what} {kid} is registered as {reg.kind}, not {' or '.join(kinds)}")
    return reg


def _same_interest(a: Registration, b: Registration) -> bool:
    if a.id == b.id:
        return True
    if a.controller is not None and a.controller in (b.controller, b.id):
        return True
    return b.controller is not None and b.controller == a.id


def admit_reverification(stmt: ParsedStatement, lookup: Lookup) -> None:
    """A re-verification: signed by a service key with the ``reverify`` role, about a registered agent."""
    verifier = _registered(lookup, stmt.facts.signer, "re-verifier", ["service"])
    if "reverify" not in verifier.roles:
        raise InvalidInput(f"service key {verifier.id} has no reverify role")
    _registered(lookup, stmt.facts.subject, "agent", ["agent"])


def admit_sitting(stmt: ParsedStatement, lookup: Lookup) -> None:
    """A sitting statement: requests and reports by the agent, opens and closes by a grader service."""
    if stmt.kind.name in ("sitting-request", "sitting-report"):
        _registered(lookup, stmt.facts.signer, "agent", ["agent"])
        return
    service = _registered(lookup, stmt.facts.signer, "sitting service", ["service"])
    if "grader" not in service.roles:
        raise InvalidInput(f"service key {service.id} has no grader role")
    _registered(lookup, stmt.facts.subject, "agent", ["agent"])


#: Party kinds whose word confirms someone else's work.
CONFIRMING_KINDS = ("ci", "counterparty", "marketplace")


def admit_work_record(stmt: ParsedStatement, lookup: Lookup) -> None:
    """A work record: self-attested by the agent's own interest, or confirmed by another's party."""
    w = stmt.predicate
    if not isinstance(w, WorkRecord):
        raise InvalidInput(f"not a work record but a {stmt.kind.predicate_type} statement")
    agent = _registered(lookup, w.agent, "agent", ["agent"])
    reporter = _registered(lookup, w.reporter, "reporter")
    same = _same_interest(reporter, agent)
    if w.attestation == "self":
        if not same:
            raise InvalidInput(
                "a self-attested work record must be signed by the agent or a key of its own controller"
            )
        return
    if reporter.kind not in CONFIRMING_KINDS:
        raise InvalidInput(
            f"reporter {reporter.id} is registered as {reporter.kind}; confirmations come from a "
            "counterparty, marketplace or ci party"
        )
    if same:
        raise InvalidInput("self-dealing: a confirming reporter must not share the agent's controller")


def admit(
    stmt: ParsedStatement, signer_ids: Sequence[str], lookup: Lookup, log_key_id: str
) -> Registration | None:
    """Raise if the signers may not make ``stmt``; return the registration a card makes (else None)."""
    name = stmt.kind.name
    p = stmt.predicate
    new = registration_of(stmt)
    if new is not None:
        old = lookup(new.id)
        if old is not None and (old.kind, old.controller, old.roles) != (new.kind, new.controller, new.roles):
            raise InvalidInput(
                f"{new.id} is registered as {old.kind}; a key's card type, controller and roles never change"
            )
        if new.kind == "service" and log_key_id not in signer_ids:
            raise SignatureError("a service card must be co-signed by the log key")
        return new
    if name == "exam-report":
        _registered(lookup, stmt.facts.signer, "agent", ["agent"])
    elif name == "graded-evidence":
        grader = _registered(lookup, stmt.facts.signer, "grader", ["service"])
        if "grader" not in grader.roles:
            raise InvalidInput(f"service key {grader.id} has no grader role")
        _registered(lookup, stmt.facts.subject, "agent", ["agent"])
    elif name == "rating-snapshot":
        snap = _registered(lookup, stmt.facts.signer, "snapshot signer", ["service"])
        if "snapshot" not in snap.roles:
            raise InvalidInput(f"service key {snap.id} has no snapshot role")
    elif isinstance(p, Settlement):
        parties = ["agent", "counterparty", "marketplace"]
        seller = _registered(lookup, p.seller, "seller", parties)
        buyer = _registered(lookup, p.buyer, "buyer", parties)
        if _same_interest(seller, buyer):
            raise InvalidInput("self-dealing: seller and buyer are the same key or share a controller")
    elif name == "event":
        market = _registered(lookup, stmt.facts.signer, "marketplace", ["marketplace"])
        agent = _registered(lookup, stmt.facts.subject, "agent", ["agent"])
        if _same_interest(market, agent):
            raise InvalidInput("self-dealing: the marketplace and the agent share a controller")
    elif name in ("reverification", "scope-run"):
        admit_reverification(stmt, lookup)
    elif name == "work-record":
        admit_work_record(stmt, lookup)
    elif name in SITTING_KINDS:
        admit_sitting(stmt, lookup)
    elif name in SUBSCRIPTION_KINDS:
        _registered(lookup, stmt.facts.signer, "subscriber", ["agent", "counterparty", "marketplace", "ci"])
    elif name == "marketplace-approval":
        if stmt.facts.signer != log_key_id or log_key_id not in signer_ids:
            raise SignatureError("a marketplace approval must be signed by the log key (the operator)")
        _registered(lookup, stmt.facts.subject, "marketplace", ["marketplace"])
    else:
        raise InvalidInput(f"no admission rule for {name}")
    return None
