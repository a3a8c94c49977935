"""Checking a submitted envelope, purely: structure, statement kind, signatures, signer.

The service resolves the keys of registered signers from the store and passes a lookup in; nothing here
touches the database. What comes out is exactly what the log stores.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from trustscore import canonical
from trustscore.errors import SignatureError
from trustscore.ledger import dsse, keys, merkle
from trustscore.ledger.statements import ParsedStatement, parse_statement


@dataclass(frozen=True)
class Prepared:
    """An envelope whose structure and statement parsed; signatures not yet checked."""

    envelope: dsse.Envelope
    payload: bytes
    statement: ParsedStatement

    @property
    def statement_hash(self) -> bytes:
        return canonical.sha256(self.payload)


@dataclass(frozen=True)
class CheckedEntry:
    """A submission whose every signature verified, ready to append."""

    leaf: bytes
    leaf_hash: bytes
    statement_hash: bytes
    signer: str
    nonce: str
    kind: str
    subject: str
    introduces_key: bytes | None
    statement: ParsedStatement


def prepare(raw: object) -> Prepared:
    """Parse a JSON value into an envelope and its statement; raise naming what is wrong."""
    env = dsse.decode_envelope(raw)
    payload = canonical.b64decode(env.payload, what="payload")
    return Prepared(envelope=env, payload=payload, statement=parse_statement(payload))


def check(p: Prepared, resolve: Callable[[str], bytes | None]) -> CheckedEntry:
    """Verify ``p``'s signatures; ``resolve`` finds registered keys. The statement's own key counts too."""
    facts = p.statement.facts
    own = facts.introduces_key
    own_id = keys.key_id(own) if own is not None else None

    carried = dict(facts.cosigners)

    def lookup(kid: str) -> bytes | None:
        return own if kid == own_id else carried.get(kid) or resolve(kid)

    verified = dsse.verify_envelope(p.envelope, lookup, p.payload)
    for required in (facts.signer, *carried):
        if required not in verified.signer_ids:
            raise SignatureError(f"a {p.statement.kind.name} statement must be signed by {required}")
    leaf = dsse.leaf_bytes(p.envelope)
    return CheckedEntry(
        leaf=leaf,
        leaf_hash=merkle.leaf_hash(leaf),
        statement_hash=p.statement_hash,
        signer=facts.signer,
        nonce=p.statement.predicate.nonce,
        kind=p.statement.kind.predicate_type,
        subject=facts.subject,
        introduces_key=own,
        statement=p.statement,
    )
