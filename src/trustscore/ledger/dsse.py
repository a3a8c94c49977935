"""DSSE envelopes (https://github.com/secure-systems-lab/dsse, protocol v1).

The signature covers PAE(payloadType, payload). We keep the payload bytes exactly as received and verify
those bytes; the leaf stored in the log is :func:`leaf_bytes`, a canonical form of the envelope in which
the payload travels as base64 of the original bytes, so nothing signed is ever re-serialised.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import msgspec

from trustscore import canonical
from trustscore.errors import InvalidInput, SignatureError, UnknownSigner, UnsupportedKind
from trustscore.ledger import keys

IN_TOTO_PAYLOAD_TYPE = "application/vnd.in-toto+json"
MAX_SIGNATURES = 4


class Signature(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    keyid: str
    sig: str


class Envelope(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    payloadType: str
    payload: str
    signatures: list[Signature]


def pae(payload_type: str, payload: bytes) -> bytes:
    """DSSE v1 Pre-Authentication Encoding."""
    t = payload_type.encode("utf-8")
    return b"DSSEv1 %d %b %d %b" % (len(t), t, len(payload), payload)


def sign(
    payload: bytes, signers: Sequence[keys.SigningKey], payload_type: str = IN_TOTO_PAYLOAD_TYPE
) -> Envelope:
    """An envelope over ``payload`` signed by every key in ``signers``."""
    message = pae(payload_type, payload)
    return Envelope(
        payloadType=payload_type,
        payload=canonical.b64encode(payload),
        signatures=[Signature(keyid=k.id, sig=canonical.b64encode(k.sign(message))) for k in signers],
    )


# An envelope holds only strings, so its canonical form needs no float check: encoded straight from the
# struct with sorted keys it is byte for byte ``canonical.encode(envelope)`` (a unit test pins this).
_leaf_encoder = msgspec.json.Encoder(order="sorted")


def leaf_bytes(envelope: Envelope) -> bytes:
    """The bytes stored as a log leaf: the canonical JSON of the envelope."""
    return _leaf_encoder.encode(envelope)


def decode_envelope(raw: object) -> Envelope:
    """Validate an already-parsed JSON value as an envelope (structure only, no crypto)."""
    try:
        env = msgspec.convert(raw, Envelope)
    except msgspec.ValidationError as exc:
        raise InvalidInput(f"not a DSSE envelope: {exc}") from exc
    if env.payloadType != IN_TOTO_PAYLOAD_TYPE:
        raise UnsupportedKind(f"payloadType must be {IN_TOTO_PAYLOAD_TYPE!r}, got {env.payloadType!r}")
    if not env.signatures:
        raise InvalidInput("envelope has no signatures")
    if len(env.signatures) > MAX_SIGNATURES:
        raise InvalidInput(f"envelope has more than {MAX_SIGNATURES} signatures")
    return env


@dataclass(frozen=True)
class VerifiedSignatures:
    """The payload bytes of an envelope and the ids of the keys whose signatures verified over them."""

    payload: bytes
    signer_ids: tuple[str, ...]


def verify_envelope(
    envelope: Envelope, resolve: Callable[[str], bytes | None], payload: bytes | None = None
) -> VerifiedSignatures:
    """Verify every signature of ``envelope``; ``resolve`` maps a key id to its public key (or None).

    Every signature must verify: one bad signature fails the whole envelope. Returns the payload as it
    was received. ``payload``: the envelope's payload already decoded from base64, if the caller has it.
    """
    if payload is None:
        payload = canonical.b64decode(envelope.payload, what="payload")
    message = pae(envelope.payloadType, payload)
    ids: list[str] = []
    for s in envelope.signatures:
        if not keys.is_key_id(s.keyid):
            raise InvalidInput(f"signature keyid {s.keyid!r} is not a trustscore key id")
        public = resolve(s.keyid)
        if public is None:
            raise UnknownSigner(f"no registered key for signer {s.keyid}")
        if keys.key_id(public) != s.keyid:
            raise SignatureError(f"key for {s.keyid} does not match its id")
        sig = canonical.b64decode(s.sig, what="signature")
        try:
            keys.verify(public, message, sig)
        except SignatureError as exc:
            raise SignatureError(f"signature by {s.keyid} does not verify") from exc
        if s.keyid in ids:
            raise InvalidInput(f"signer {s.keyid} signed twice")
        ids.append(s.keyid)
    return VerifiedSignatures(payload=payload, signer_ids=tuple(ids))
