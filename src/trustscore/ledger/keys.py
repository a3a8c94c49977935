"""Ed25519 keys, self-certifying identities and key files.

An identity is derived from its public key: ``ts1_`` + the first 20 bytes of SHA-256(public key) in hex.
Anyone holding the key can check the id; the key itself is published in the signer's card in the log.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

import nacl.exceptions
import nacl.signing

from trustscore.canonical import b64decode, b64encode
from trustscore.errors import InvalidInput, SignatureError

ID_PREFIX = "ts1_"
ID_PATTERN = "^ts1_[0-9a-f]{40}$"  # a key id as schemas state it (is_key_id, lowercase)
KEY_FILE_TYPE = "trustscore-ed25519-private-key-v1"


@functools.lru_cache(maxsize=4096)  # a card's key is looked up several times while it is checked
def key_id(public_key: bytes) -> str:
    """The self-certifying id of an Ed25519 public key."""
    if len(public_key) != 32:
        raise InvalidInput("an Ed25519 public key is 32 bytes")
    return ID_PREFIX + hashlib.sha256(public_key).digest()[:20].hex()


def is_key_id(text: str) -> bool:
    if not text.startswith(ID_PREFIX) or len(text) != len(ID_PREFIX) + 40:
        return False
    try:
        bytes.fromhex(text[len(ID_PREFIX) :])
    except ValueError:
        return False
    return True


def verify(public_key: bytes, message: bytes, signature: bytes) -> None:
    """Return if ``signature`` is a valid Ed25519 signature of ``message``; raise otherwise."""
    try:
        nacl.signing.VerifyKey(public_key).verify(message, signature)
    except (nacl.exceptions.BadSignatureError, nacl.exceptions.ValueError, ValueError, TypeError) as exc:
        raise SignatureError("Ed25519 signature does not verify") from exc


@dataclass(frozen=True)
class SigningKey:
    """An Ed25519 private key with its public half and id."""

    _key: nacl.signing.SigningKey

    @classmethod
    def generate(cls) -> SigningKey:
        return cls(nacl.signing.SigningKey.generate())

    @classmethod
    def from_seed(cls, seed: bytes) -> SigningKey:
        if len(seed) != 32:
            raise InvalidInput("an Ed25519 seed is 32 bytes")
        return cls(nacl.signing.SigningKey(seed))

    @property
    def seed(self) -> bytes:
        return bytes(self._key)

    @property
    def public_key(self) -> bytes:
        return bytes(self._key.verify_key)

    @property
    def id(self) -> str:
        return key_id(self.public_key)

    def sign(self, message: bytes) -> bytes:
        return self._key.sign(message).signature


def write_key_file(path: Path, key: SigningKey) -> None:
    """Write ``key`` to a new file readable only by its owner (mode 0600); never overwrite."""
    body = json.dumps({"type": KEY_FILE_TYPE, "seed": b64encode(key.seed), "id": key.id}) + "\n"
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError as exc:
        raise InvalidInput(f"{path} already exists; refusing to overwrite a key") from exc
    except OSError as exc:
        raise InvalidInput(f"cannot create {path}: {exc.strerror}") from exc
    with os.fdopen(fd, "w") as f:
        f.write(body)


def read_key_file(path: Path) -> SigningKey:
    """Load a key file written by :func:`write_key_file`; raise :class:`InvalidInput` naming the problem."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError as exc:
        raise InvalidInput(f"key file {path} does not exist") from exc
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise InvalidInput(f"key file {path} is not a trustscore key file") from exc
    if (
        not isinstance(data, dict)
        or data.get("type") != KEY_FILE_TYPE
        or not isinstance(data.get("seed"), str)
    ):
        raise InvalidInput(f"key file {path} is not a trustscore key file")
    key = SigningKey.from_seed(b64decode(data["seed"], what=f"seed in {path}"))
    if data.get("id") not in (None, key.id):
        raise InvalidInput(f"key file {path}: its id does not match its key")
    return key
