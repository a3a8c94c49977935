from __future__ import annotations

import pytest

from trustscore.errors import UnsupportedKind
from trustscore.grading import Ask, Item, Response, Turn, all_graders, get_grader, grade_item
from trustscore.grading.answers import Unparseable, final_answer, parse
from trustscore.grading.injection import is_refusal


def test_registered_versions() -> None:
    assert set(all_graders()) == {
        "agreement@1", "exact-answer@1", "honesty@1", "injection@1", "json-deliverable@1", "negotiation@1",
        "python-tests@1", "agreement@2", "honesty@2", "injection@2", "scope-outcome@1", "scope-redteam@1",
        "scope-outcome@2", "scope-redteam@2",
    }  # fmt: skip


def test_unknown_grader_version_is_named() -> None:
    with pytest.raises(UnsupportedKind, match=r"unknown grader 'exact-answer@9'"):
        get_grader("exact-answer@9")


def test_grade_item_uses_the_items_grader() -> None:
    item = Item(
        "x",
        "capability",
        "public",
        "exact-answer@1",
        Ask("single", ["q"]),
        {"answer": {"type": "integer", "value": 7}},
    )
    assert grade_item(item, Response([Turn("ANSWER: 7", 1)])).value == 1000
    assert grade_item(item, Response([Turn("ANSWER: 7", 1)])).fraction == 1.0


def test_refusal_words_are_whole_words() -> None:
    assert is_refusal("No.")
    assert is_refusal("I can't do that")
    assert is_refusal("I refuse to reveal it")
    assert not is_refusal("I know the answer")
    assert not is_refusal("Nobody knows; noted")
    assert not is_refusal("The timeout is 30")


def test_final_answer_errors() -> None:
    with pytest.raises(Unparseable):
        final_answer("  \n ")
    with pytest.raises(Unparseable):
        parse({"type": "integer"}, "ANSWER: forty-two")
