"""C2SP signed notes (https://c2sp.org/signed-note) with Ed25519, compatible with golang.org/x/mod/sumdb/note.

A signed note is a text ending in a newline, a blank line, then signature lines
``"— <name> <base64(4-byte key hash || 64-byte Ed25519 signature)>\\n"``. The signature covers the text
bytes (UTF-8) including its final newline. A verifier key is ``<name>+<8 hex key hash>+<base64(0x01 ||
public key)>`` and the key hash is the first 4 bytes of SHA-256(name || "\\n" || 0x01 || public key).
See ``docs/merkle.md``.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from trustscore.canonical import b64decode, b64encode
from trustscore.errors import InvalidInput, SignatureError
from trustscore.ledger.keys import SigningKey, verify

ALG_ED25519 = 0x01
SIG_PREFIX = "— "  # em dash U+2014, space
MAX_SIGNATURES = 100
_HASH_HEX = re.compile(r"[0-9a-f]{8}")


@dataclass(frozen=True)
class Verifier:
    """A trusted note key: its name, 4-byte key hash and 32-byte Ed25519 public key."""

    name: str
    key_hash: bytes
    public_key: bytes

    def key(self) -> str:
        """The verifier key string of this key (``<name>+<hash>+<base64 key>``)."""
        return make_verifier_key(self.name, self.public_key)


def key_hash(name: str, public_key: bytes) -> bytes:
    """The 4-byte key hash (key ID) of an Ed25519 key under ``name``."""
    _check_name(name)
    if len(public_key) != 32:
        raise InvalidInput("an Ed25519 public key is 32 bytes")
    return hashlib.sha256(name.encode() + b"\n" + bytes([ALG_ED25519]) + public_key).digest()[:4]


def make_verifier_key(name: str, public_key: bytes) -> str:
    """The verifier key string for ``public_key`` under ``name``."""
    return f"{name}+{key_hash(name, public_key).hex()}+{b64encode(bytes([ALG_ED25519]) + public_key)}"


def verifier_for(name: str, public_key: bytes) -> Verifier:
    """The :class:`Verifier` for ``public_key`` under ``name``."""
    return Verifier(name, key_hash(name, public_key), public_key)


def parse_verifier_key(text: str) -> Verifier:
    """Parse a verifier key string; raise :class:`InvalidInput` if it is malformed or its hash is wrong."""
    parts = text.split("+", 2)  # the base64 key may itself contain "+"
    if len(parts) != 3:
        raise InvalidInput("a verifier key is <name>+<hash>+<key>")
    name, hash_hex, key_b64 = parts
    _check_name(name)
    if not _HASH_HEX.fullmatch(hash_hex):
        raise InvalidInput("a verifier key hash is 8 lowercase hex digits")
    key = b64decode(key_b64, what="verifier key")
    if len(key) != 33 or key[0] != ALG_ED25519:
        raise InvalidInput("a verifier key must be an Ed25519 key (0x01 followed by 32 bytes)")
    public_key = key[1:]
    if key_hash(name, public_key).hex() != hash_hex:
        raise InvalidInput("verifier key hash does not match its name and key")
    return Verifier(name, bytes.fromhex(hash_hex), public_key)


def sign_note(text: str, name: str, signing_key: SigningKey) -> str:
    """Sign ``text`` (which must end in a newline) as ``name``; returns the signed note."""
    _check_text(text)
    if not text.endswith("\n"):
        raise InvalidInput("note text must end with a newline")
    hash4 = key_hash(name, signing_key.public_key)
    signature = signing_key.sign(text.encode())
    return f"{text}\n{SIG_PREFIX}{name} {b64encode(hash4 + signature)}\n"


def open_note(note: str | bytes, verifier: Verifier) -> str:
    """Return the text of ``note`` if ``verifier`` signed it; raise otherwise.

    Signatures by other keys are ignored, as the spec requires. Every signature by ``verifier``
    must verify. Raises :class:`InvalidInput` for a malformed note and :class:`SignatureError` when
    there is no signature by ``verifier`` or one of its signatures is bad.
    """
    if isinstance(note, bytes):
        try:
            note = note.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInput("signed note is not valid UTF-8") from exc
    _check_text(note)
    split = note.rfind("\n\n")
    if split < 0:
        raise InvalidInput("signed note has no blank line before its signatures")
    text, block = note[: split + 1], note[split + 2 :]
    if not block.endswith("\n"):
        raise InvalidInput("signed note must end with a signature line and a newline")
    lines = block[:-1].split("\n")
    if len(lines) > MAX_SIGNATURES:
        raise InvalidInput(f"signed note has more than {MAX_SIGNATURES} signatures")
    message = text.encode()
    verified = False
    for line in lines:
        name, signature = _parse_signature_line(line)
        if name != verifier.name or signature[:4] != verifier.key_hash:
            continue  # an unknown key (possibly sharing a name or a hash with ours): ignore
        try:
            verify(verifier.public_key, message, signature[4:])
        except SignatureError as exc:
            raise SignatureError(f"invalid signature by note key {verifier.name}") from exc
        verified = True
    if not verified:
        raise SignatureError(f"note has no signature by key {verifier.name}+{verifier.key_hash.hex()}")
    return text


def _parse_signature_line(line: str) -> tuple[str, bytes]:
    if not line.startswith(SIG_PREFIX):
        raise InvalidInput("signature line does not start with an em dash and a space")
    name, sep, b64 = line[len(SIG_PREFIX) :].partition(" ")
    if not sep or not b64:
        raise InvalidInput("signature line is '— <name> <base64 signature>'")
    _check_name(name)
    signature = b64decode(b64, what="note signature")
    if len(signature) < 5:
        raise InvalidInput("note signature is too short")
    return name, signature


def _check_name(name: str) -> None:
    if not name or "+" in name or any(c.isspace() or ord(c) < 0x20 for c in name):
        raise InvalidInput(f"invalid note key name {name!r}: non-empty, no spaces and no '+'")


def _check_text(text: str) -> None:
    if any(ord(c) < 0x20 and c != "\n" for c in text):
        raise InvalidInput("a note must not contain control characters other than newline")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise InvalidInput("a note must be valid UTF-8") from exc
