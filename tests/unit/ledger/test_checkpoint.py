"""C2SP tlog checkpoints: body format, strict parsing, signing and consistency between checkpoints."""

from __future__ import annotations

import base64

import pytest

from trustscore.errors import InconsistencyError, InvalidInput, SignatureError, VerificationError
from trustscore.ledger import merkle
from trustscore.ledger.checkpoint import (
    Checkpoint,
    open_checkpoint,
    parse_checkpoint,
    sign_checkpoint,
    verify_consistent,
)
from trustscore.ledger.keys import SigningKey
from trustscore.ledger.note import sign_note, verifier_for

ORIGIN = "trustscore.example/log"
LEAVES = [merkle.leaf_hash(b"%d" % i) for i in range(20)]


def cp(size: int) -> Checkpoint:
    return Checkpoint(ORIGIN, size, merkle.root_from_leaf_hashes(LEAVES[:size]))


def test_body_format() -> None:
    root = bytes(range(32))
    assert Checkpoint(ORIGIN, 20852163, root).body() == (
        f"{ORIGIN}\n20852163\n{base64.b64encode(root).decode()}\n"
    )
    assert cp(0).body() == f"{ORIGIN}\n0\n47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=\n"


def test_sign_and_open_round_trip() -> None:
    key = SigningKey.generate()
    verifier = verifier_for(ORIGIN, key.public_key)
    signed = sign_checkpoint(cp(7), key, ORIGIN)
    assert signed.startswith(cp(7).body() + "\n— " + ORIGIN + " ")
    assert open_checkpoint(signed, verifier, ORIGIN) == cp(7)
    assert open_checkpoint(signed.encode(), verifier, None) == cp(7)
    assert sign_checkpoint(cp(7), key) == signed  # the key name defaults to the origin

    with pytest.raises(VerificationError, match="not 'other"):
        open_checkpoint(signed, verifier, "other.example/log")
    with pytest.raises(SignatureError):
        open_checkpoint(signed.replace("\n7\n", "\n8\n"), verifier, ORIGIN)
    with pytest.raises(SignatureError):
        open_checkpoint(signed, verifier_for(ORIGIN, SigningKey.generate().public_key), ORIGIN)


def test_extension_lines_are_kept() -> None:
    key = SigningKey.generate()
    with_ext = Checkpoint(ORIGIN, 3, cp(3).root, ("ext one", "ext two"))
    signed = sign_checkpoint(with_ext, key)
    opened = open_checkpoint(signed, verifier_for(ORIGIN, key.public_key), ORIGIN)
    assert opened == with_ext
    assert opened.body() == with_ext.body()


@pytest.mark.parametrize(
    "text",
    [
        f"{ORIGIN}\n07\n{base64.b64encode(bytes(32)).decode()}\n",  # leading zero
        f"{ORIGIN}\n-7\n{base64.b64encode(bytes(32)).decode()}\n",
        f"{ORIGIN}\n+7\n{base64.b64encode(bytes(32)).decode()}\n",
        f"{ORIGIN}\n 7\n{base64.b64encode(bytes(32)).decode()}\n",
        f"{ORIGIN}\n٧\n{base64.b64encode(bytes(32)).decode()}\n",  # non-ASCII digit
        f"{ORIGIN}\n18446744073709551616\n{base64.b64encode(bytes(32)).decode()}\n",  # 2**64
        f"{ORIGIN}\n7\n{base64.b64encode(bytes(31)).decode()}\n",  # short root
        f"{ORIGIN}\n7\n{base64.b64encode(bytes(32)).decode().rstrip('=')}\n",  # unpadded
        f"{ORIGIN}\n7\n{base64.b64encode(bytes(32)).decode()}",  # no final newline
        f"{ORIGIN}\n7\n{base64.b64encode(bytes(32)).decode()}\n\n",  # empty extension line
        f"{ORIGIN}\n7\n",
        f"\n7\n{base64.b64encode(bytes(32)).decode()}\n",  # empty origin
        f"{ORIGIN}\n0\n{base64.b64encode(bytes(32)).decode()}\n",  # size 0 needs the empty root
    ],
)
def test_malformed_checkpoints_are_rejected(text: str) -> None:
    with pytest.raises(InvalidInput):
        parse_checkpoint(text)


def test_malformed_checkpoint_with_good_signature_is_rejected() -> None:
    key = SigningKey.generate()
    signed = sign_note(f"{ORIGIN}\n007\n{base64.b64encode(cp(7).root).decode()}\n", ORIGIN, key)
    with pytest.raises(InvalidInput, match="leading zeros"):
        open_checkpoint(signed, verifier_for(ORIGIN, key.public_key), ORIGIN)


def test_parse_accepts_the_largest_size() -> None:
    text = f"{ORIGIN}\n{2**64 - 1}\n{base64.b64encode(bytes(32)).decode()}\n"
    assert parse_checkpoint(text, ORIGIN).size == 2**64 - 1


def test_verify_consistent() -> None:
    for size1 in range(0, 21):
        for size2 in range(size1, 21):
            proof = merkle.consistency_proof(size1, size2, LEAVES)
            assert verify_consistent(cp(size1), cp(size2), proof) == cp(size2)


def test_inconsistency_carries_both_checkpoints_and_the_proof() -> None:
    proof = merkle.consistency_proof(5, 9, LEAVES)
    forked = Checkpoint(ORIGIN, 9, merkle.leaf_hash(b"fork"))
    with pytest.raises(InconsistencyError) as err:
        verify_consistent(cp(5), forked, proof)
    assert (err.value.old, err.value.new, err.value.proof) == (cp(5), forked, proof)

    with pytest.raises(InconsistencyError) as err:
        verify_consistent(cp(5), cp(9), proof[:-1])  # malformed proof
    assert err.value.old == cp(5)
    assert err.value.new == cp(9)

    with pytest.raises(InconsistencyError, match="smaller"):
        verify_consistent(cp(9), cp(5), [])
    with pytest.raises(InconsistencyError, match="different roots"):
        verify_consistent(cp(9), Checkpoint(ORIGIN, 9, merkle.leaf_hash(b"fork")), [])
    with pytest.raises(InconsistencyError, match="empty tree"):
        verify_consistent(cp(0), cp(9), proof)
    with pytest.raises(InvalidInput, match="different logs"):
        verify_consistent(cp(5), Checkpoint("other", 9, cp(9).root), proof)


def test_checkpoint_fields_are_validated() -> None:
    with pytest.raises(InvalidInput):
        Checkpoint(ORIGIN, -1, bytes(32))
    with pytest.raises(InvalidInput):
        Checkpoint(ORIGIN, 1, bytes(31))
    with pytest.raises(InvalidInput):
        Checkpoint("two\nlines", 1, bytes(32))
    with pytest.raises(InvalidInput):
        Checkpoint(ORIGIN, 1, bytes(32), ("",))
