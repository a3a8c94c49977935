"""RFC 3339 UTC times as integer microseconds since the Unix epoch.

The engine keeps every time as an ``int64`` count of microseconds so that ages and orderings are exact;
only UTC is accepted (``Z`` or ``+00:00``), so a time has exactly one meaning. Digits after the sixth
fractional digit are truncated.
"""

from __future__ import annotations

import datetime as dt
import re

from trustscore.errors import InvalidInput

MICROS_PER_DAY = 86_400_000_000
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_RFC3339_UTC = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})[Tt](\d{2}):(\d{2}):(\d{2})(?:\.(\d+))?(?:[Zz]|\+00:00)",
    re.ASCII,
)


def parse_time(text: str) -> int:
    """Microseconds since the epoch of an RFC 3339 UTC time; raises :class:`InvalidInput` otherwise."""
    match = _RFC3339_UTC.fullmatch(text)
    if match is None:
        raise InvalidInput(f"not an RFC 3339 UTC time (use a Z suffix): {text!r}")
    year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
    fraction = (match.group(7) or "")[:6].ljust(6, "0")
    try:
        moment = dt.datetime(year, month, day, hour, minute, second, int(fraction), tzinfo=dt.UTC)
    except ValueError as exc:
        raise InvalidInput(f"not a valid time: {text!r}") from exc
    return to_micros(moment)


def to_micros(moment: dt.datetime) -> int:
    """Microseconds since the epoch of an aware datetime (any offset; naive times are refused)."""
    if moment.tzinfo is None or moment.utcoffset() is None:
        raise InvalidInput("times must be timezone-aware (UTC)")
    return (moment - _EPOCH) // dt.timedelta(microseconds=1)


def from_micros(micros: int) -> dt.datetime:
    return _EPOCH + dt.timedelta(microseconds=micros)


def format_time(micros: int) -> str:
    """The canonical RFC 3339 form: ``YYYY-MM-DDTHH:MM:SS[.ffffff]Z``."""
    text = from_micros(micros).strftime("%Y-%m-%dT%H:%M:%S.%f").removesuffix(".000000")
    return text + "Z"
