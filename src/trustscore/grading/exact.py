"""``exact-answer@1``: one reply, graded on its exactly parsed final answer."""

from __future__ import annotations

from trustscore.grading import answers
from trustscore.grading.grader import Grader, no_answer, require
from trustscore.grading.model import Grade, Item, Response, failure, success


def check(item: Item) -> None:
    require(item.ask.kind == "single", item, "exact-answer items are asked once (ask.kind 'single')")
    require(set(item.args) == {"answer"}, item, "arguments must be exactly {'answer': spec}")
    problem = answers.check_spec(item.args["answer"], need_value=True)
    require(problem is None, item, problem or "")


def grade(item: Item, response: Response) -> Grade:
    if not response.turns:
        return no_answer(response)
    spec = item.args["answer"]
    try:
        got = answers.parse(spec, response.turns[0].output)
    except answers.Unparseable as exc:
        return failure(f"unparseable final answer: {exc}")
    if got in answers.accepted(spec):
        return success(f"correct: {answers.show(got)}")
    return failure(f"wrong: expected {answers.show(answers.expected(spec))}, got {answers.show(got)}")


EXACT_ANSWER_V1 = Grader("exact-answer", 1, grade, check, family="exact")
