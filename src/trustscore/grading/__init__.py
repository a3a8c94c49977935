"""Deterministic graders: pure functions ``(item, response) -> Grade`` registered as ``name@version``.

The same code marks a report in the SDK and re-grades it on the server, so a grader never reads the
clock, randomness or the network. Changing behaviour means registering a new version; old versions stay
importable so old reports re-grade identically. See docs/graders.md.
"""

from trustscore.grading.grader import Grader
from trustscore.grading.model import Ask, Grade, Item, ItemGrade, Response, Turn
from trustscore.grading.registry import all_graders, get_grader, grade_item

__all__ = [
    "Ask",
    "Grade",
    "Grader",
    "Item",
    "ItemGrade",
    "Response",
    "Turn",
    "all_graders",
    "get_grader",
    "grade_item",
]
