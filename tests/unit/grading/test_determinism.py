"""The same responses always give the same grades, whatever order they are graded in."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from trustscore.grading import Grade, grade_item
from trustscore.grading.answers import parse
from trustscore.grading.vectors import DEFAULT_DIR, Case, load

CASES: list[Case] = [
    c for p in sorted(DEFAULT_DIR.glob("*.json")) if p.stem != "python-tests@1" for c in load(p).cases
]
BASELINE: list[Grade] = [grade_item(c.item, c.response) for c in CASES]


@settings(max_examples=50, deadline=None)
@given(st.permutations(range(len(CASES))))
def test_grades_do_not_depend_on_order(order: list[int]) -> None:
    grades = {i: grade_item(CASES[i].item, CASES[i].response) for i in order}
    assert [grades[i] for i in range(len(CASES))] == BASELINE


@given(st.fractions(), st.sampled_from(["{}", "ANSWER: {}", "**Answer:** {}", "work\nANSWER: {}."]))
def test_exact_numbers_parse_to_themselves(value: Fraction, template: str) -> None:
    text = template.format(f"{value.numerator}/{value.denominator}")
    assert parse({"type": "number"}, text) == value


@given(st.integers(min_value=-(10**12), max_value=10**12))
def test_integers_with_separators(n: int) -> None:
    assert parse({"type": "integer"}, f"ANSWER: {n:,}") == n
    assert parse({"type": "integer"}, f"ANSWER: {n}") == n


@settings(deadline=None)  # it grades every vector case twice per example; speed has its own bounded tests
@given(st.text(max_size=200))
def test_graders_never_crash_on_arbitrary_text(text: str) -> None:
    from trustscore.grading import Response, Turn

    for case in CASES:
        turns = [Turn(text, 0)] * max(1, len(case.response.turns))
        g = grade_item(case.item, Response(turns))
        assert 0 <= g.value <= 1000
        assert g == grade_item(case.item, Response(turns))
