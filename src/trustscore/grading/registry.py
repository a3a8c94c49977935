"""The registry of grader versions, keyed ``name@version``: every grader of the built-in grader modules.

The registry imports the grader modules (each defines its :class:`~trustscore.grading.grader.Grader`
values); grader modules never import the registry.
"""

from __future__ import annotations

from collections.abc import Iterable
from types import ModuleType

from trustscore.errors import UnsupportedKind
from trustscore.grading import (
    agreement,
    code,
    delivery,
    exact,
    honesty,
    injection,
    injection_v2,
    negotiation,
    scope,
)
from trustscore.grading.grader import Grader
from trustscore.grading.model import Grade, Item, Response

_MODULES: tuple[ModuleType, ...] = (
    agreement,
    code,
    delivery,
    exact,
    honesty,
    injection,
    injection_v2,
    negotiation,
    scope,
)


def _index(graders: Iterable[Grader]) -> dict[str, Grader]:
    """Graders by ref; two different graders under one ref is a programming error."""
    out: dict[str, Grader] = {}
    for g in graders:
        if out.get(g.ref, g) is not g:
            raise ValueError(f"grader {g.ref} registered twice")
        out[g.ref] = g
    return dict(sorted(out.items()))


_REGISTRY = _index(g for m in _MODULES for g in vars(m).values() if isinstance(g, Grader))


def get_grader(ref: str) -> Grader:
    """The grader registered as ``ref`` (``name@version``); raise naming it if unknown."""
    grader = _REGISTRY.get(ref)
    if grader is None:
        known = ", ".join(sorted(_REGISTRY))
        raise UnsupportedKind(f"unknown grader {ref!r} (known: {known})")
    return grader


def all_graders() -> dict[str, Grader]:
    return dict(_REGISTRY)


def grade_item(item: Item, response: Response) -> Grade:
    """Grade one response with the item's grader. Malformed grader arguments are an error, not a grade."""
    grader = get_grader(item.grader)
    grade = grader.grade(item, response)
    if not 0 <= grade.value <= 1000:
        raise AssertionError(f"grader {grader.ref} returned value {grade.value} outside 0..1000")
    return grade
