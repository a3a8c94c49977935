"""If-None-Match and Accept-Encoding as RFC 9110 defines them: an explicit refusal of gzip is honoured,
and a 304 needs a real match, not a substring."""

from __future__ import annotations

import pytest

from trustscore.api.conditional import accepts_gzip, etag_matches

TAG = '"abc123"'


@pytest.mark.parametrize(
    ("header", "matches"),
    [
        (TAG, True),
        ('W/"abc123"', True),
        ('"zzz", "abc123"', True),
        ("*", True),
        ('"abc1234"', False),  # a substring match would say yes
        ('"xabc123"x', False),
        ("", False),
        ('"abc"', False),
    ],
)
def test_if_none_match(header: str, matches: bool) -> None:
    assert etag_matches(header, TAG) is matches


@pytest.mark.parametrize(
    ("header", "gzip"),
    [
        ("gzip", True),
        ("gzip, deflate, br", True),
        ("br;q=1.0, gzip;q=0.5", True),
        ("gzip;q=0", False),  # an explicit refusal
        ("GZIP;Q=0.0", False),
        ("*", True),
        ("*;q=0", False),
        ("identity", False),
        ("", False),
        ("gzip;q=abc", False),
        ("x-gzip", True),
        ("*, gzip;q=0", False),
    ],
)
def test_accept_encoding(header: str, gzip: bool) -> None:
    assert accepts_gzip(header) is gzip
