"""Tolerances: an item within 100 millis matches; a run with at least 90% matching items matches."""

from __future__ import annotations

import pytest

from trustscore.errors import InvalidInput
from trustscore.kinds.reverification.compare import (
    ITEM_TOLERANCE_MILLIS,
    RUN_THRESHOLD_MILLIS,
    compare,
    item_matches,
)


def test_the_documented_numbers() -> None:
    assert (ITEM_TOLERANCE_MILLIS, RUN_THRESHOLD_MILLIS) == (100, 900)


@pytest.mark.parametrize(
    ("reported", "observed", "matched"),
    [
        (1000, 900, True),
        (1000, 899, False),
        (0, 100, True),
        (0, 101, False),
        (500, 500, True),
        (500, None, False),
    ],
)
def test_item_tolerance_edges(reported: int, observed: int | None, matched: bool) -> None:
    assert item_matches(reported, observed) is matched


def test_nine_of_ten_matches_and_eight_of_nine_does_not() -> None:
    nine = compare([(f"i{n}", 1000, 1000 if n < 9 else 0) for n in range(10)])
    assert (nine.matched_millis, nine.outcome) == (900, "match")
    eight = compare([(f"i{n}", 1000, 1000 if n < 8 else 0) for n in range(9)])
    assert (eight.matched_millis, eight.outcome) == (888, "mismatch")  # rounded down, never up


def test_no_answer_at_all_is_unreachable_and_some_answers_are_a_mismatch() -> None:
    down = compare([("a", 1000, None), ("b", 0, None)])
    assert (down.matched_millis, down.outcome) == (0, "unreachable")
    flaky = compare([("a", 1000, 1000), ("b", 1000, None)])
    assert (flaky.matched_millis, flaky.outcome) == (500, "mismatch")


def test_refuses_empty_or_out_of_range() -> None:
    with pytest.raises(InvalidInput, match="at least one"):
        compare([])
    with pytest.raises(InvalidInput, match=r"0\.\.1000"):
        compare([("a", 1001, 0)])
    with pytest.raises(InvalidInput, match=r"0\.\.1000"):
        compare([("a", 0, -1)])
