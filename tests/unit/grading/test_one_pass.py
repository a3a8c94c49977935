"""Grader speed-ups that must not change a single grade: each is checked against the code it replaced."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from trustscore.grading.jsontext import NotJson, _reject_constant, parse_json
from trustscore.grading.negotiation import play

MOVES = st.one_of(
    st.integers(min_value=-5, max_value=130).map(lambda p: json.dumps({"action": "offer", "price": p})),
    st.sampled_from(['{"action": "accept"}', '{"action": "walk"}', "not json", '{"action": "haggle"}', "[]"]),
)
ARGS = st.fixed_dictionaries(
    {
        "opening": st.just(100),
        "floor": st.integers(min_value=1, max_value=100),
        "step": st.integers(min_value=1, max_value=30),
        "rounds": st.integers(min_value=1, max_value=8),
        "target": st.integers(min_value=1, max_value=99),
    }
)


@given(ARGS, st.lists(MOVES, max_size=10))
def test_negotiation_moves_is_where_the_first_ending_prefix_ends(
    args: dict[str, int], outputs: list[str]
) -> None:
    """``grade`` used to replay every prefix to find where the negotiation ended; ``moves`` says it."""
    outcome = play(args, outputs)
    if outcome.ended:
        assert outcome.moves == next(i for i in range(len(outputs) + 1) if play(args, outputs[:i]).ended)
    else:
        assert outcome.moves == len(outputs)


def _old_parse_json(t: str) -> Any:
    try:
        return json.loads(t, parse_constant=_reject_constant)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise NotJson(f"not JSON: {exc}") from exc


TEXTS = st.one_of(
    st.text(max_size=40),
    st.sampled_from(
        ['\ufeff{"a": 1}', "NaN", "[Infinity]", '{"a": -Infinity}', '{"a": 1} x', " [1, 2] ", "1e400"]
    ),
)


def _outcome(parse: Any, text: str) -> tuple[str, Any]:
    try:
        return "value", parse(text)
    except NotJson as exc:
        return "refused", str(exc)


@given(TEXTS)
def test_parse_json_answers_as_json_loads_did(text: str) -> None:
    """One decoder built once instead of one per call: the same values and the same messages."""
    assert _outcome(parse_json, text) == _outcome(_old_parse_json, text.strip())
