from __future__ import annotations

import datetime as dt

import pytest

from trustscore.errors import InvalidInput
from trustscore.scoring.times import format_time, parse_time, to_micros


def test_utc_forms() -> None:
    base = parse_time("2026-11-30T00:00:00Z")
    assert base == to_micros(dt.datetime(2026, 11, 30, tzinfo=dt.UTC))
    assert parse_time("2026-11-30T00:00:00+00:00") == base
    assert parse_time("2026-11-30t00:00:00z") == base
    assert parse_time("2026-11-30T00:00:00.5Z") == base + 500_000
    assert parse_time("2026-11-30T00:00:00.1234567Z") == base + 123_456
    assert format_time(base + 500_000) == "2026-11-30T00:00:00.500000Z"
    assert format_time(base) == "2026-11-30T00:00:00Z"


@pytest.mark.parametrize(
    "text",
    [
        "2026-11-30",
        "2026-11-30T00:00:00",
        "2026-11-30T00:00:00+01:00",
        "2026-02-30T00:00:00Z",
        " 2026-11-30T00:00:00Z",
    ],
)
def test_rejects_non_utc_or_malformed(text: str) -> None:
    with pytest.raises(InvalidInput):
        parse_time(text)


def test_naive_datetime_rejected() -> None:
    with pytest.raises(InvalidInput):
        to_micros(dt.datetime(2026, 1, 1))
