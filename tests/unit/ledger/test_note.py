"""C2SP signed notes: known answers from golang.org/x/mod/sumdb/note, round trips and tampering."""

from __future__ import annotations

import base64

import pytest

from trustscore.errors import InvalidInput, SignatureError
from trustscore.ledger import note
from trustscore.ledger.keys import SigningKey

# Known answers from golang.org/x/mod/sumdb/note (note.go docs and note_test.go).
PETER_VKEY = "PeterNeumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"
PETER_SKEY_B64 = "AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"  # from PRIVATE+KEY+PeterNeumann+c74f20a3+...
ENOCH_VKEY = "EnochRoot+af0cfe78+ATtqJ7zOtqQtYqOo0CpvDXNlMhV3HeJDpjrASKGLWdop"
TEXT = "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n"
PETER_SIG = "— PeterNeumann x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"
ENOCH_SIG = "— EnochRoot rwz+eBzmZa0SO3NbfRGzPCpDckykFXSdeX+MNtCOXm2/5n2tiOHp+vAF1aGrQ5ovTG01oOTGwnWLox33WWd1RvMc+QQ=\n"


def peter_key() -> SigningKey:
    raw = base64.b64decode(PETER_SKEY_B64)
    assert raw[0] == 1
    return SigningKey.from_seed(raw[1:])


def test_known_answer_verifier_key() -> None:
    key = peter_key()
    assert note.make_verifier_key("PeterNeumann", key.public_key) == PETER_VKEY
    verifier = note.parse_verifier_key(PETER_VKEY)
    assert verifier == note.Verifier("PeterNeumann", bytes.fromhex("c74f20a3"), key.public_key)
    assert verifier == note.verifier_for("PeterNeumann", key.public_key)
    assert verifier.key() == PETER_VKEY
    assert note.parse_verifier_key(ENOCH_VKEY).key_hash == bytes.fromhex("af0cfe78")


def test_known_answer_signature() -> None:
    assert note.sign_note(TEXT, "PeterNeumann", peter_key()) == TEXT + "\n" + PETER_SIG


def test_known_answer_open_ignores_unknown_signatures() -> None:
    signed = TEXT + "\n" + PETER_SIG + ENOCH_SIG
    assert note.open_note(signed, note.parse_verifier_key(PETER_VKEY)) == TEXT
    assert note.open_note(signed, note.parse_verifier_key(ENOCH_VKEY)) == TEXT
    assert note.open_note(signed.encode(), note.parse_verifier_key(ENOCH_VKEY)) == TEXT


@pytest.mark.parametrize(
    "bad",
    [
        PETER_VKEY[:-1],
        PETER_VKEY[1:],
        PETER_VKEY + "+",
        "PeterNeumann+c74f20a4+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",  # wrong hash
        "PeterNeumann+C74F20A3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",  # not canonical hex
        "PeterNeuman+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",  # name changed
        "PeterNeumann+cc469956+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TWBADKEY==",  # wrong key length
        "PeterNeumann+173116ae+ZRpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",  # unknown algorithm
        "Peter Neumann+c74f20a3+ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW",
        "",
    ],
)
def test_malformed_verifier_keys_are_rejected(bad: str) -> None:
    with pytest.raises(InvalidInput):
        note.parse_verifier_key(bad)


def test_every_mangled_verifier_key_is_rejected() -> None:
    for i in range(len(PETER_VKEY)):
        mangled = PETER_VKEY[:i] + chr(ord(PETER_VKEY[i]) + 1) + PETER_VKEY[i + 1 :]
        with pytest.raises(InvalidInput):
            note.parse_verifier_key(mangled)


def test_round_trip_and_tampering() -> None:
    key = SigningKey.generate()
    verifier = note.verifier_for("log.example/one", key.public_key)
    text = "hello\n\nworld with a blank line\n"
    signed = note.sign_note(text, "log.example/one", key)
    assert note.open_note(signed, verifier) == text

    with pytest.raises(SignatureError, match="invalid signature"):
        note.open_note(signed.replace("world", "w0rld"), verifier)

    sig_line = signed.splitlines()[-1]
    raw = bytearray(base64.b64decode(sig_line.split(" ")[2]))
    raw[10] ^= 1
    tampered = signed.replace(sig_line, f"— log.example/one {base64.b64encode(bytes(raw)).decode()}")
    with pytest.raises(SignatureError):
        note.open_note(tampered, verifier)

    other = note.verifier_for("log.example/one", SigningKey.generate().public_key)
    with pytest.raises(SignatureError, match="no signature"):
        note.open_note(signed, other)
    renamed = note.verifier_for("log.example/two", key.public_key)
    with pytest.raises(SignatureError, match="no signature"):
        note.open_note(signed, renamed)


def test_unknown_signature_lines_are_ignored_wherever_they_appear() -> None:
    key, stranger = SigningKey.generate(), SigningKey.generate()
    verifier = note.verifier_for("log", key.public_key)
    mine = note.sign_note(TEXT, "log", key)
    theirs = note.sign_note(TEXT, "witness", stranger).split("\n\n")[-1]
    same_name = note.sign_note(TEXT, "log", stranger).split("\n\n")[-1]  # same name, other key hash
    assert note.open_note(mine + theirs + same_name, verifier) == TEXT
    assert note.open_note(TEXT + "\n" + theirs + mine.split("\n\n")[-1], verifier) == TEXT
    with pytest.raises(SignatureError):
        note.open_note(TEXT + "\n" + theirs + same_name, verifier)


def test_a_bad_signature_by_the_known_key_rejects_the_note() -> None:
    bad = PETER_SIG[:60] + "ABCD" + PETER_SIG[60:]
    with pytest.raises(SignatureError, match="invalid signature"):
        note.open_note(TEXT + "\n" + bad, note.parse_verifier_key(PETER_VKEY))
    with pytest.raises(SignatureError):
        note.open_note(TEXT + "\n" + PETER_SIG + bad, note.parse_verifier_key(PETER_VKEY))


@pytest.mark.parametrize(
    "bad",
    [
        TEXT,
        TEXT + "\n",
        TEXT + "\n" + PETER_SIG[:-1],
        "\x01" + TEXT + "\n" + PETER_SIG,
        TEXT
        + "\n"
        + "— Bad Name x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=",
        TEXT + "\n" + PETER_SIG + "Unexpected line.\n",
        TEXT + "\n" + PETER_SIG * 101,
        TEXT + "\n" + "— PeterNeumann AAAA\n",
        TEXT + "\n" + "— PeterNeumann not-base64!\n",
        TEXT + "\n" + "- PeterNeumann x08go/ZJkuBS9UG\n",
    ],
)
def test_malformed_notes_are_rejected(bad: str) -> None:
    with pytest.raises(InvalidInput):
        note.open_note(bad, note.parse_verifier_key(PETER_VKEY))


def test_invalid_utf8_is_rejected() -> None:
    with pytest.raises(InvalidInput):
        note.open_note(b"\xff" + (TEXT + "\n" + PETER_SIG).encode(), note.parse_verifier_key(PETER_VKEY))


@pytest.mark.parametrize(("text", "name"), [("no newline", "log"), ("tab\there\n", "log"), ("ok\n", "a+b"),
                                            ("ok\n", "a b"), ("ok\n", "")])  # fmt: skip
def test_sign_rejects_bad_text_or_name(text: str, name: str) -> None:
    with pytest.raises(InvalidInput):
        note.sign_note(text, name, SigningKey.generate())
