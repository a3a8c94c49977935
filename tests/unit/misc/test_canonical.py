"""Canonical JSON is RFC 8785, checked against an independent implementation (the rfc8785 package)."""

from __future__ import annotations

from typing import Any

import pytest
import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from trustscore import canonical
from trustscore.errors import InvalidInput

# Keys and strings from the corners of Unicode where encoders disagree: astral characters (UTF-16
# surrogate pairs sort below U+E000..U+FFFF), the private-use area, controls, quotes and escapes.
TRICKY = st.sampled_from(
    [
        "",
        "a",
        "\x00",
        "\x1f",
        "\x7f",
        '"',
        "\\",
        "/",
        "\u2028",
        "\ud7ff",
        "\ue000",
        "\uffff",
        "\U00010000",
        "\U0001f600",
        "\U0010ffff",
        "é",
        "e\u0301",
        "ÿ",
    ]
)
TEXT = st.lists(TRICKY | st.characters(exclude_categories=["Cs"]), max_size=6).map("".join)
SAFE_INT = st.integers(min_value=-canonical.MAX_SAFE_INTEGER, max_value=canonical.MAX_SAFE_INTEGER)
VALUES = st.recursive(
    st.none() | st.booleans() | SAFE_INT | TEXT,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(TEXT, inner, max_size=5),
    max_leaves=25,
)


@given(VALUES)
def test_equals_an_independent_rfc8785_implementation(value: Any) -> None:
    assert canonical.encode(value) == rfc8785.dumps(value)


def test_keys_sort_by_utf16_code_units_not_code_points() -> None:
    # U+1F600 is the surrogate pair D83D DE00 in UTF-16, which sorts before U+E000; by code point it is after.
    value = {"\ue000": 1, "\U0001f600": 2}
    assert canonical.encode(value) == '{"\U0001f600":2,"\ue000":1}'.encode()
    assert canonical.encode(value) == rfc8785.dumps(value)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (0.5, "floats"),
        ({"x": 2**53}, "2**53"),
        ([-(2**53)], "2**53"),
        ({"x": "\ud800"}, "lone surrogate"),
        ({"\udfff": 1}, "lone surrogate"),
        ({1: 2}, "keys must be strings"),
    ],
)
def test_refuses_what_it_cannot_encode_exactly(value: Any, words: str) -> None:
    with pytest.raises(InvalidInput, match=words.replace("*", r"\*")):
        canonical.encode(value)


def test_the_largest_safe_integers_encode_exactly() -> None:
    assert canonical.encode([2**53 - 1, -(2**53 - 1)]) == b"[9007199254740991,-9007199254740991]"


@given(VALUES | st.lists(VALUES, max_size=3).map(tuple))
def test_the_fast_path_gives_the_general_paths_bytes(value: Any) -> None:
    """Plain values are encoded by msgspec with sorted keys; the bytes must be the general path's."""
    general = canonical._encoder.encode(canonical._canonical(value))
    assert canonical.encode(value) == general


def test_structs_and_tuples_encode_as_their_builtins() -> None:
    import msgspec

    class Inner(msgspec.Struct):
        z: int
        a: tuple[str, ...]

    class Outer(msgspec.Struct, rename={"kind": "_type"}):
        kind: str
        inner: list[Inner]
        extra: dict[str, int]

    value = Outer("t", [Inner(1, ("x", "é"))], {"b": 2, "a": 1})
    expected = '{"_type":"t","extra":{"a":1,"b":2},"inner":[{"a":["x","é"],"z":1}]}'.encode()
    general = canonical._encoder.encode(canonical._canonical(msgspec.to_builtins(value)))
    assert canonical.encode(value) == expected == general


def test_plain_values_take_the_fast_path_and_the_rest_the_general_one() -> None:
    assert (
        canonical._fast({"a": [1, {"b": "é", "c": None}], "d": True})
        == '{"a":[1,{"b":"é","c":null}],"d":true}'.encode()
    )
    deep: Any = 1
    for _ in range(7):
        deep = [deep]
    for other in ({"\ue000": 1}, {1: 2}, [0.5], [2**53], {"x": "\ud800"}, deep):
        assert canonical._fast(other) is None
    assert canonical.encode(deep) == b"[[[[[[[1]]]]]]]"
