"""``json-deliverable@1``: a structured deliverable under a time budget.

The reply must be one JSON value (optionally in a ``` fence) that satisfies the item's schema (see
:mod:`trustscore.grading.schema`). Valid and within ``budget_ms`` is 1, valid but late 0.5, invalid 0.
The elapsed time is the one recorded in the response by the runner, so re-grading a report is
deterministic; the server measures it afresh when it re-asks the agent.
"""

from __future__ import annotations

from trustscore.grading import schema
from trustscore.grading.grader import Grader, arg, no_answer, require
from trustscore.grading.jsontext import NotJson, parse_json
from trustscore.grading.model import Grade, Item, Response, failure, partial, success


def check(item: Item) -> None:
    require(item.ask.kind == "single", item, "deliverables are asked once")
    require(set(item.args) == {"schema", "budget_ms"}, item, "arguments must be 'schema' and 'budget_ms'")
    require(arg(item, "budget_ms", int) > 0, item, "budget_ms must be positive")
    try:
        schema.check_schema(item.args["schema"])
    except ValueError as exc:
        require(False, item, str(exc))


def grade(item: Item, response: Response) -> Grade:
    if not response.turns:
        return no_answer(response)
    turn = response.turns[0]
    try:
        value = parse_json(turn.output)
    except NotJson as exc:
        return failure(f"invalid deliverable: {exc}", valid=0)
    errors = schema.validate(value, item.args["schema"])
    if errors:
        more = f" (+{len(errors) - 1} more)" if len(errors) > 1 else ""
        return failure(f"invalid deliverable: {errors[0]}{more}", valid=0)
    budget = item.args["budget_ms"]
    if turn.elapsed_ms > budget:
        return partial(500, f"valid but late: {turn.elapsed_ms} ms > {budget} ms", valid=1, on_time=0)
    return success(f"valid and on time ({turn.elapsed_ms} ms <= {budget} ms)", valid=1, on_time=1)


JSON_DELIVERABLE_V1 = Grader("json-deliverable", 1, grade, check, family="structured")
