"""``agreement@1``: the same question asked several times; the value is how far the answers agree.

Each reply is parsed by the item's answer spec. The value is the size of the largest group of equal
parsed answers over the number of asks; an unparseable reply agrees with nothing. Whether the agreed
answer is right is reported as the ``correct`` facet but does not change the value (capability items
measure correctness; this measures stability).

``agreement@2`` (below) reads the same items but scores agreement on the *expected* answer: the value is
the share of asks answered correctly, so a constant answer agrees perfectly and still scores 0.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from trustscore.grading import answers
from trustscore.grading.grader import Grader, no_answer, require
from trustscore.grading.model import MAX_MILLIS, Grade, Item, Response, failure, partial, success


def check(item: Item) -> None:
    require(item.ask.kind == "repeat" and item.ask.times >= 2, item, "agreement items repeat (times >= 2)")
    require(set(item.args) == {"answer"}, item, "arguments must be exactly {'answer': spec}")
    problem = answers.check_spec(item.args["answer"], need_value=False)
    require(problem is None, item, problem or "")


def _parsed(item: Item, response: Response) -> list[Any] | Grade:
    """The parsed answers of the replies that parse, or the failing grade when there is nothing to judge."""
    n = item.ask.times
    if not response.turns:
        return no_answer(response)
    if len(response.turns) > n:
        return failure(f"{len(response.turns)} replies for {n} asks")
    parsed = []
    for turn in response.turns:
        try:
            parsed.append(answers.parse(item.args["answer"], turn.output))
        except answers.Unparseable:
            continue
    return parsed or failure("no reply has a parseable final answer")


def _modal(parsed: list[Any]) -> tuple[Any, int]:
    """The most common answer (ties broken by repr, so the choice is deterministic) and its count."""
    modal, count = sorted(Counter(parsed).items(), key=lambda kv: (-kv[1], repr(kv[0])))[0]
    return modal, count


def grade(item: Item, response: Response) -> Grade:
    parsed = _parsed(item, response)
    if isinstance(parsed, Grade):
        return parsed
    n, spec = item.ask.times, item.args["answer"]
    modal, count = _modal(parsed)
    facets = {"agreeing": count, "asks": n}
    if "value" in spec:
        facets["correct"] = int(modal in answers.accepted(spec))
    value = count * MAX_MILLIS // n
    detail = f"{count} of {n} answers agree on {answers.show(modal)}"
    if count == n:
        return success(detail, **facets)
    if count == 1:
        return failure(detail, **facets)
    return partial(value, detail, **facets)


AGREEMENT_V1 = Grader("agreement", 1, grade, check, family="consistency")


def check_v2(item: Item) -> None:
    check(item)
    problem = answers.check_spec(item.args["answer"], need_value=True)
    require(problem is None, item, f"{problem} (agreement@2 grades correctness too)")


def grade_v2(item: Item, response: Response) -> Grade:
    """``agreement@2``: the value is the share of asks whose answer is the expected one, so a constant
    (agreeing but wrong) answer scores 0. Same items as v1, but the spec must carry a ``value``."""
    parsed = _parsed(item, response)
    if isinstance(parsed, Grade):
        return parsed
    n, spec = item.ask.times, item.args["answer"]
    modal, agreeing = _modal(parsed)
    good = answers.accepted(spec)
    correct = sum(1 for p in parsed if p in good)
    facets = {"agreeing": agreeing, "asks": n, "correct": correct}
    detail = f"{correct} of {n} answers are the expected one ({agreeing} agree on {answers.show(modal)})"
    if correct == n:
        return success(detail, **facets)
    if correct <= 1:
        return failure(detail, **facets)
    return partial(correct * MAX_MILLIS // n, detail, **facets)


AGREEMENT_V2 = Grader("agreement", 2, grade_v2, check_v2, family="consistency")
