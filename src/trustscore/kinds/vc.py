"""W3C Verifiable Credentials 2.0 secured with a Data Integrity proof, cryptosuite ``eddsa-jcs-2022``.

Follows the W3C "Data Integrity EdDSA Cryptosuites v1.0" (vc-di-eddsa) algorithms for ``eddsa-jcs-2022``:
the proof options (the proof without ``proofValue``) and the document (without ``proof``) are each
canonicalised with JCS (RFC 8785), ``hashData = SHA-256(proof options) || SHA-256(document)``, the
signature is Ed25519 over ``hashData`` and ``proofValue`` is multibase base58btc (``z`` + base58).
Issuers are ``did:key`` identifiers of Ed25519 keys (multicodec 0xed01). See docs/attestations.md.

JCS here is :func:`trustscore.canonical.encode` (RFC 8785): documents holding a non-integer number or an
integer beyond ±(2^53 − 1) are refused rather than rounded. Pure: no I/O.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

from trustscore import canonical
from trustscore.errors import InvalidInput, SignatureError
from trustscore.ledger import keys

CREDENTIALS_V2 = "https://www.w3.org/ns/credentials/v2"
PROOF_TYPE = "DataIntegrityProof"
CRYPTOSUITE = "eddsa-jcs-2022"
ED25519_PUB_MULTICODEC = b"\xed\x01"
_B58 = "123456789ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz"
_B58_INDEX = {c: i for i, c in enumerate(_B58)}


def b58encode(data: bytes) -> str:
    """Bitcoin base58 (the alphabet of multibase ``base58btc``); leading zero bytes become ``1``."""
    n = int.from_bytes(data, "big")
    out = []
    while n:
        n, r = divmod(n, 58)
        out.append(_B58[r])
    zeros = len(data) - len(data.lstrip(b"\0"))
    return "1" * zeros + "".join(reversed(out))


def b58decode(text: str) -> bytes:
    n = 0
    for c in text:
        digit = _B58_INDEX.get(c)
        if digit is None:
            raise InvalidInput(f"{c!r} is not a base58btc character")
        n = n * 58 + digit
    zeros = len(text) - len(text.lstrip("1"))
    return b"\0" * zeros + (n.to_bytes((n.bit_length() + 7) // 8, "big") if n else b"")


def multibase_encode(data: bytes) -> str:
    return "z" + b58encode(data)


def multibase_decode(text: str, *, what: str) -> bytes:
    if not text.startswith("z") or len(text) < 2:
        raise InvalidInput(f"{what} must be multibase base58btc (starting with 'z')")
    return b58decode(text[1:])


def did_key(public_key: bytes) -> str:
    """The ``did:key`` of an Ed25519 public key: ``did:key:z`` + base58(0xed 0x01 || key)."""
    if len(public_key) != 32:
        raise InvalidInput("an Ed25519 public key is 32 bytes")
    return "did:key:" + multibase_encode(ED25519_PUB_MULTICODEC + public_key)


def did_key_public_key(did: str) -> bytes:
    """The Ed25519 public key of a ``did:key`` (a verification method URL ``did:key:z…#z…`` too)."""
    base, _, fragment = did.partition("#")
    if not base.startswith("did:key:"):
        raise InvalidInput(f"{did!r} is not a did:key")
    raw = multibase_decode(base[len("did:key:") :], what="did:key")
    if len(raw) != 34 or raw[:2] != ED25519_PUB_MULTICODEC:
        raise InvalidInput(f"{base} is not an Ed25519 did:key")
    if fragment and fragment != base[len("did:key:") :]:
        raise InvalidInput(f"verification method {did!r} does not name the key of its did:key")
    return raw[2:]


def jcs(value: Any) -> bytes:
    """RFC 8785 bytes of a float-free JSON value (:func:`trustscore.canonical.encode` is RFC 8785)."""
    return canonical.encode(value)


def hash_data(proof_options: Mapping[str, Any], document: Mapping[str, Any]) -> bytes:
    """``SHA-256(JCS(proof options)) || SHA-256(JCS(document))``, the bytes an ``eddsa-jcs-2022`` proof signs."""
    return hashlib.sha256(jcs(proof_options)).digest() + hashlib.sha256(jcs(document)).digest()


def sign_credential(
    credential: Mapping[str, Any],
    key: keys.SigningKey,
    *,
    created: str,
    verification_method: str | None = None,
    proof_purpose: str = "assertionMethod",
) -> dict[str, Any]:
    """``credential`` with an ``eddsa-jcs-2022`` DataIntegrityProof by ``key`` (default method: its did:key)."""
    if "proof" in credential:
        raise InvalidInput("the credential already has a proof")
    document = dict(credential)
    if verification_method is None:
        did = did_key(key.public_key)
        verification_method = f"{did}#{did[len('did:key:') :]}"
    options: dict[str, Any] = {
        "type": PROOF_TYPE,
        "cryptosuite": CRYPTOSUITE,
        "created": created,
        "verificationMethod": verification_method,
        "proofPurpose": proof_purpose,
    }
    if "@context" in document:
        options["@context"] = document["@context"]
    signature = key.sign(hash_data(options, document))
    return {**document, "proof": {**options, "proofValue": multibase_encode(signature)}}


def verify_credential(secured: Mapping[str, Any], public_key: bytes | None = None) -> dict[str, Any]:
    """Verify the ``eddsa-jcs-2022`` proof of ``secured``; return the document without its proof.

    The key is ``public_key`` if given, else the one named by a ``did:key`` verification method. Raises
    :class:`InvalidInput` for a malformed credential or proof and :class:`SignatureError` when the
    proof does not verify.
    """
    proof = secured.get("proof")
    if not isinstance(proof, Mapping):
        raise InvalidInput("the credential has no proof object")
    if proof.get("type") != PROOF_TYPE or proof.get("cryptosuite") != CRYPTOSUITE:
        raise InvalidInput(f"the proof must be a {PROOF_TYPE} with cryptosuite {CRYPTOSUITE}")
    value = proof.get("proofValue")
    if not isinstance(value, str):
        raise InvalidInput("the proof has no proofValue")
    signature = multibase_decode(value, what="proofValue")
    options = {k: v for k, v in proof.items() if k != "proofValue"}
    document = {k: v for k, v in secured.items() if k != "proof"}
    if "@context" in options:
        ctx, doc_ctx = options["@context"], document.get("@context")
        ctx_list = ctx if isinstance(ctx, list) else [ctx]
        doc_list = doc_ctx if isinstance(doc_ctx, list) else [doc_ctx]
        if doc_list[: len(ctx_list)] != ctx_list:
            raise SignatureError("the proof's @context is not a prefix of the credential's @context")
        document["@context"] = ctx
    method = options.get("verificationMethod")
    if public_key is None:
        if not isinstance(method, str):
            raise InvalidInput("the proof names no verificationMethod")
        public_key = did_key_public_key(method)
    issuer = document.get("issuer")
    issuer_id = issuer.get("id") if isinstance(issuer, Mapping) else issuer
    is_did_key = isinstance(issuer_id, str) and issuer_id.startswith("did:key:")
    if is_did_key and did_key_public_key(str(issuer_id)) != public_key:
        raise SignatureError(f"the proof is not by the issuer's key {issuer_id}")
    try:
        keys.verify(public_key, hash_data(options, document), signature)
    except SignatureError as exc:
        raise SignatureError("the credential's eddsa-jcs-2022 proof does not verify") from exc
    return {k: v for k, v in secured.items() if k != "proof"}
