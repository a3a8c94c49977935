"""The one canonical encoding of trustscore: JSON with sorted keys, no whitespace, UTF-8, no floats.

For values without floats this is RFC 8785 (JCS) for ASCII keys. Signed payloads never contain floats
(fixed-point integers instead); :func:`encode` refuses them so one cannot slip in. Signed bytes are
kept as received and verified as received: this module is for *producing* bytes, never for
re-serialising something to check a signature.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Any

import msgspec

from trustscore.errors import InvalidInput

_encoder = msgspec.json.Encoder(order="sorted")


def _reject_floats(value: Any) -> None:
    if isinstance(value, float):
        raise InvalidInput("floats are not allowed in signed payloads; use fixed-point integers")
    if isinstance(value, dict):
        for k, v in value.items():
            if not isinstance(k, str):
                raise InvalidInput("object keys must be strings")
            _reject_floats(v)
    elif isinstance(value, list | tuple):
        for v in value:
            _reject_floats(v)


def encode(value: Any) -> bytes:
    """Canonical bytes of a JSON-compatible value (dicts, lists, str, int, bool, None, msgspec structs)."""
    plain = msgspec.to_builtins(value, order="sorted")
    _reject_floats(plain)
    return _encoder.encode(plain)


def sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def b64encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def b64decode(text: str, *, what: str = "value") -> bytes:
    """Strict standard base64 (with padding); raises :class:`InvalidInput` naming ``what``."""
    try:
        return base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError) as exc:
        raise InvalidInput(f"{what} is not valid base64") from exc
