"""The one canonical encoding of trustscore: RFC 8785 (JCS) JSON, restricted to values it encodes exactly.

Keys sort by their UTF-16 code units (RFC 8785 section 3.2.3), strings are escaped as JCS does, no
whitespace, UTF-8. What JCS cannot encode exactly is refused rather than rounded: floats (signed payloads
use fixed-point integers; JCS writes numbers as IEEE doubles), integers beyond +-(2**53 - 1) (the
I-JSON safe range JCS requires) and strings with lone surrogates (not UTF-8). The test suite checks the
output against an independent RFC 8785 implementation on tricky inputs. Signed bytes are
kept as received and verified as received: this module is for *producing* bytes, never for
re-serialising something to check a signature.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from typing import Annotated, Any, Union

import msgspec

from trustscore.errors import InvalidInput

#: The largest integer JCS encodes exactly (2**53 - 1, I-JSON's safe range).
MAX_SAFE_INTEGER = 2**53 - 1
_SURROGATE_ORDER = "\ue000"  # below this code point, code point order and UTF-16 order agree
_encoder = msgspec.json.Encoder()  # keys arrive already in canonical order; insertion order is kept
_sorted_encoder = msgspec.json.Encoder(order="sorted")  # dict keys in code point order
# Every byte below 0xEE: deleting them leaves the UTF-8 lead bytes of characters at or above U+E000, the
# only characters for which code point order and UTF-16 order can disagree (continuation bytes are
# 0x80..0xBF).
_BELOW_U_E000_LEADS = bytes(range(0xEE))
_MSGPACK_DEPTH = 6  # values nested deeper take the general path (the type below grows as 2**depth)


def _plain_type(depth: int) -> Any:
    """JSON values JCS encodes exactly (string keys, safe integers, no floats), nested ``depth`` deep."""
    safe_int = Annotated[int, msgspec.Meta(ge=-MAX_SAFE_INTEGER, le=MAX_SAFE_INTEGER)]
    t: Any = Union[None, bool, safe_int, str]  # noqa: UP007 - a runtime type
    for _ in range(depth):
        t = Union[None, bool, safe_int, str, list[t], dict[str, t]]  # noqa: UP007 - a runtime type
    return t


# msgpack keeps what JSON would hide (integer keys stay integers), so a typed msgpack round trip checks
# a builtins value in C: the fast path of :func:`encode`.
_to_msgpack = msgspec.msgpack.Encoder()
_check_plain = msgspec.msgpack.Decoder(_plain_type(_MSGPACK_DEPTH))


def _utf16(key: str) -> bytes:
    return key.encode("utf-16-be", "surrogatepass")


def _canonical(value: Any) -> Any:
    """``value`` (builtins) with every object's keys in UTF-16 order; raise on what JCS cannot encode."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidInput("strings must be valid Unicode (a lone surrogate is not)") from exc
        return value
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise InvalidInput(f"integer {value} is beyond +-(2**53 - 1), which canonical JSON cannot encode")
        return value
    if isinstance(value, float):
        raise InvalidInput("floats are not allowed in signed payloads; use fixed-point integers")
    if isinstance(value, dict):
        for k in value:
            if not isinstance(k, str):
                raise InvalidInput("object keys must be strings")
        keys = sorted(value)
        if any(k and max(k) >= _SURROGATE_ORDER for k in keys):
            keys.sort(key=_utf16)
        return {_canonical(k): _canonical(value[k]) for k in keys}
    if isinstance(value, list | tuple):
        return [_canonical(v) for v in value]
    raise InvalidInput(f"{type(value).__name__} is not a JSON value")


def _fast(plain: Any) -> bytes | None:
    """The canonical bytes of builtins ``plain`` if msgspec can check and encode them alone, else None."""
    try:
        _check_plain.decode(_to_msgpack.encode(plain))
        data = _sorted_encoder.encode(plain)
    except Exception:
        return None  # whatever it is, the general path refuses it by name (or encodes it slowly)
    return None if data.translate(None, _BELOW_U_E000_LEADS) else data


def encode(value: Any) -> bytes:
    """Canonical (RFC 8785) bytes of a JSON-compatible value (dicts, lists, str, int, bool, None, msgspec
    structs); raises :class:`InvalidInput` for what it cannot encode exactly.

    The common case (plain values nested at most 6 deep, no character at or above U+E000) is checked and
    encoded in C by msgspec, with sorted keys: byte for byte what the general path gives. Anything else
    takes the general path, which sorts keys by UTF-16 code units and raises naming what it refuses."""
    plain = msgspec.to_builtins(value)
    data = _fast(plain)
    return _encoder.encode(_canonical(plain)) if data is None else data


def sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def b64encode(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


#: Each base64 character's 6-bit value (the standard alphabet).
_B64_VALUE = {c: i for i, c in enumerate("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/")}


def b64decode(text: str, *, what: str = "value") -> bytes:
    """Strict, canonical standard base64 (with padding, pad bits zero: the one encoding of its bytes);
    raises :class:`InvalidInput` naming ``what``.

    Python's decoder ignores the unused low bits of the last character, so "AB==" and "AA==" both decode
    to one zero byte; a log that kept such text would hold leaves a strict decoder (RFC 4648 §3.5 lets one
    refuse them; Rust's ``base64`` does by default) cannot read, and one signature under several encodings.
    """
    try:
        data = base64.b64decode(text.encode("ascii"), validate=True)
    except (binascii.Error, UnicodeEncodeError, ValueError) as exc:
        raise InvalidInput(f"{what} is not valid base64") from exc
    # Only a padded last quantum has unused bits: the low 4 bits of the character before "==", the low 2
    # before a single "=" (cheaper than encoding the bytes again: ~0.1 µs against ~2 µs for 2 KB).
    unused = 0
    if text.endswith("=="):
        unused = _B64_VALUE[text[-3]] & 0x0F
    elif text.endswith("="):
        unused = _B64_VALUE[text[-2]] & 0x03
    if unused:
        raise InvalidInput(
            f"{what} is not canonical base64 (the unused bits of its last character must be 0)"
        )
    return data
