"""Grading a sitting report against the regenerated items, purely (docs/exams.md, "Sittings").

The same function runs on the server when a report arrives and in ``trustscore exam check-sitting``
afterwards, so anyone can recompute the server's grades from the log. Dialogue items are graded on the
moves the agent played with the server's counterpart (published in the sitting-close statement): a
report whose moves differ from those fails the item, so a dialogue cannot be rehearsed and rewritten.
"""

from __future__ import annotations

from trustscore.errors import InvalidInput
from trustscore.grading import ItemGrade, Response, grade_item
from trustscore.grading.model import Item, failure
from trustscore.kinds.exam_report import ReportItem


def grade_sitting(
    items: list[Item], responses: list[ReportItem], dialogues: dict[str, list[str]]
) -> list[ItemGrade]:
    """One grade per item, in item order; the report must answer exactly the sitting's items."""
    by_id = {r.item_id: r for r in responses}
    ids = [i.id for i in items]
    extra = sorted(set(by_id) - set(ids))
    if extra:
        raise InvalidInput(f"report answers item {extra[0]!r}, which is not in this sitting")
    missing = [i for i in ids if i not in by_id]
    if missing:
        raise InvalidInput(f"report has no response for item {missing[0]!r} of this sitting")
    grades = []
    for item in items:
        r = by_id[item.id]
        if item.ask.kind == "dialogue" and [t.output for t in r.turns] != dialogues.get(item.id, []):
            grade = failure("the reported moves differ from those played with the server")
        else:
            grade = grade_item(item, Response(r.turns, r.error))
        grades.append(ItemGrade(item.id, item.dimension, item.grader, grade))
    return grades


def expired_grades(items: list[Item]) -> list[ItemGrade]:
    """Every item a failure: the sitting was not reported by its deadline."""
    return [ItemGrade(i.id, i.dimension, i.grader, failure("not reported by the deadline")) for i in items]
