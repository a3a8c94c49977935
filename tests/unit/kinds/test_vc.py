"""VC 2.0 Data Integrity proofs with ``eddsa-jcs-2022``: the W3C vc-di-eddsa test vectors, base58btc,
did:key, and tampering."""

from __future__ import annotations

import copy
import hashlib
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from trustscore.errors import InvalidInput, SignatureError
from trustscore.kinds import vc
from trustscore.ledger import keys

# W3C vc-di-eddsa, TestVectors/keyPair.json and TestVectors/eddsa-jcs-2022/ (the spec's example).
PUBLIC_MULTIBASE = "z6MkrJVnaZkeFzdQyMZu1cgjg7k1pZZ6pvBQ7XJPt4swbTQ2"
PRIVATE_MULTIBASE = "z3u2en7t5LR2WtQH5PfFqMqwVHBeXouLzo6haApm8XHqvjxq"  # 0x8026 || 32-byte seed
CONTEXT = ["https://www.w3.org/ns/credentials/v2", "https://www.w3.org/ns/credentials/examples/v2"]
UNSECURED: dict[str, Any] = {
    "@context": CONTEXT,
    "id": "urn:uuid:58172aac-d8ba-11ed-83dd-0b3aef56cc33",
    "type": ["VerifiableCredential", "AlumniCredential"],
    "name": "Alumni Credential",
    "description": "A minimum viable example of an Alumni Credential.",
    "issuer": "https://vc.example/issuers/5678",
    "validFrom": "2023-01-01T00:00:00Z",
    "credentialSubject": {"id": "did:example:abcdefgh", "alumniOf": "The School of Examples"},
}
CANON_DOC = (
    '{"@context":["https://www.w3.org/ns/credentials/v2","https://www.w3.org/ns/credentials/examples/v2"],'
    '"credentialSubject":{"alumniOf":"The School of Examples","id":"did:example:abcdefgh"},'
    '"description":"A minimum viable example of an Alumni Credential.",'
    '"id":"urn:uuid:58172aac-d8ba-11ed-83dd-0b3aef56cc33","issuer":"https://vc.example/issuers/5678",'
    '"name":"Alumni Credential","type":["VerifiableCredential","AlumniCredential"],'
    '"validFrom":"2023-01-01T00:00:00Z"}'
)
DOC_HASH = "59b7cb6251b8991add1ce0bc83107e3db9dbbab5bd2c28f687db1a03abc92f19"
METHOD = "https://vc.example/issuers/5678#" + PUBLIC_MULTIBASE
# The current vector (proof options carry the document's @context) and the earlier one (they do not).
PROOF_WITH_CONTEXT = (
    "z63t83Y53KfzJ5ZosfKTnqfMcKB2dmTrfjSaQjeNNjAD5srBowQfmWqeRb8rRjmeEuCBEsddF9LsVogtuTsijJKh4"
)
PROOF_WITHOUT_CONTEXT = (
    "z3P6rHMUaWG6e3Ac6xYFht8aEvoVXndgKTtEY8kzWYXzk8dKmAo2GJeZiJw4qoZ2PGp4ugdaHx3oQiLpeFBLDqP2M"
)
PROOF_HASH_WITHOUT_CONTEXT = "56d860737b1bc788da1f5c5a506115278314559a680f37976502c9b3ed1f38f4"


def spec_key() -> keys.SigningKey:
    raw = vc.multibase_decode(PRIVATE_MULTIBASE, what="private key")
    assert raw[:2] == b"\x80\x26"
    return keys.SigningKey.from_seed(raw[2:])


def spec_secured(*, with_context: bool) -> dict[str, Any]:
    proof: dict[str, Any] = {
        "type": "DataIntegrityProof",
        "cryptosuite": "eddsa-jcs-2022",
        "created": "2023-02-24T23:36:38Z",
        "verificationMethod": METHOD,
        "proofPurpose": "assertionMethod",
    }
    if with_context:
        proof["@context"] = CONTEXT
    proof["proofValue"] = PROOF_WITH_CONTEXT if with_context else PROOF_WITHOUT_CONTEXT
    return {**copy.deepcopy(UNSECURED), "proof": proof}


def test_spec_key_pair_and_did_key() -> None:
    key = spec_key()
    assert vc.did_key(key.public_key) == "did:key:" + PUBLIC_MULTIBASE
    assert vc.did_key_public_key("did:key:" + PUBLIC_MULTIBASE) == key.public_key
    assert vc.did_key_public_key(f"did:key:{PUBLIC_MULTIBASE}#{PUBLIC_MULTIBASE}") == key.public_key


def test_spec_canonical_document_and_hashes() -> None:
    assert vc.jcs(UNSECURED).decode() == CANON_DOC
    assert hashlib.sha256(vc.jcs(UNSECURED)).hexdigest() == DOC_HASH
    options = {k: v for k, v in spec_secured(with_context=False)["proof"].items() if k != "proofValue"}
    assert vc.hash_data(options, UNSECURED).hex() == PROOF_HASH_WITHOUT_CONTEXT + DOC_HASH


@pytest.mark.parametrize("with_context", [True, False])
def test_spec_vectors_verify_and_sign_identically(with_context: bool) -> None:
    secured = spec_secured(with_context=with_context)
    key = spec_key()
    assert vc.verify_credential(secured, key.public_key) == UNSECURED
    # Ed25519 is deterministic: signing the same proof options reproduces the spec's proofValue.
    signed = vc.sign_credential(UNSECURED, key, created="2023-02-24T23:36:38Z", verification_method=METHOD)
    if with_context:
        assert signed == secured
    else:
        assert signed["proof"]["proofValue"] == PROOF_WITH_CONTEXT


def test_round_trip_with_did_key_and_tampering() -> None:
    key = keys.SigningKey.generate()
    credential = {
        "@context": [vc.CREDENTIALS_V2],
        "type": ["VerifiableCredential"],
        "issuer": vc.did_key(key.public_key),
        "validFrom": "2026-01-01T00:00:00Z",
        "credentialSubject": {"id": "urn:x", "total": 612, "dims": {"a": None, "b": 1}},
    }
    secured = vc.sign_credential(credential, key, created="2026-01-01T00:00:00Z")
    assert vc.verify_credential(secured) == credential
    changed = copy.deepcopy(secured)
    changed["credentialSubject"]["total"] = 613
    with pytest.raises(SignatureError, match="does not verify"):
        vc.verify_credential(changed)
    changed = copy.deepcopy(secured)
    changed["proof"]["created"] = "2026-01-02T00:00:00Z"
    with pytest.raises(SignatureError):
        vc.verify_credential(changed)
    other = keys.SigningKey.generate()
    forged = vc.sign_credential(credential, other, created="2026-01-01T00:00:00Z")
    with pytest.raises(SignatureError, match="issuer's key"):
        vc.verify_credential(forged)
    changed = copy.deepcopy(secured)
    changed["@context"] = ["https://example.com/other"]
    with pytest.raises(SignatureError, match="@context"):
        vc.verify_credential(changed)


def test_refuses_what_jcs_would_encode_differently() -> None:
    with pytest.raises(InvalidInput, match="float"):
        vc.jcs({"x": 0.5})
    with pytest.raises(InvalidInput, match="2\\*\\*53"):
        vc.jcs({"x": 2**53})
    with pytest.raises(InvalidInput, match="base58btc"):
        vc.multibase_decode("z0OIl", what="x")
    with pytest.raises(InvalidInput, match="multibase"):
        vc.multibase_decode("u123", what="x")


@given(st.binary(max_size=80))
def test_base58_round_trip(data: bytes) -> None:
    assert vc.b58decode(vc.b58encode(data)) == data


def test_base58_known_values() -> None:
    assert vc.b58encode(b"") == ""
    assert vc.b58encode(b"\0\0\x01") == "112"
    assert vc.b58encode(b"hello world") == "StV1DL6CwTryKyV"
