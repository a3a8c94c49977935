"""The registry of grader versions, keyed ``name@version``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trustscore.errors import InvalidInput, UnsupportedKind
from trustscore.grading.model import Grade, Item, Response, failure

GradeFn = Callable[[Item, Response], Grade]
ArgsCheck = Callable[[Item], None]
Dialogue = Callable[[Item, list[str]], str | None]


@dataclass(frozen=True)
class Grader:
    """A grader version. ``check`` validates an item's arguments at exam-load time and raises
    :class:`InvalidInput`; ``dialogue`` (multi-turn graders only) gives the scripted counterpart's next
    message for the agent's outputs so far, or ``None`` once the conversation has ended."""

    name: str
    version: int
    grade: GradeFn
    check: ArgsCheck
    family: str
    dialogue: Dialogue | None = None

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.version}"


_REGISTRY: dict[str, Grader] = {}


def register(grader: Grader) -> Grader:
    if grader.ref in _REGISTRY:
        raise ValueError(f"grader {grader.ref} registered twice")
    _REGISTRY[grader.ref] = grader
    return grader


def _load_builtin() -> None:
    # Importing the modules registers their graders; done lazily to keep imports acyclic.
    from trustscore.grading import (  # noqa: F401
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


def get_grader(ref: str) -> Grader:
    """The grader registered as ``ref`` (``name@version``); raise naming it if unknown."""
    _load_builtin()
    grader = _REGISTRY.get(ref)
    if grader is None:
        known = ", ".join(sorted(_REGISTRY))
        raise UnsupportedKind(f"unknown grader {ref!r} (known: {known})")
    return grader


def all_graders() -> dict[str, Grader]:
    _load_builtin()
    return dict(sorted(_REGISTRY.items()))


def grade_item(item: Item, response: Response) -> Grade:
    """Grade one response with the item's grader. Malformed grader arguments are an error, not a grade."""
    grader = get_grader(item.grader)
    grade = grader.grade(item, response)
    if not 0 <= grade.value <= 1000:
        raise AssertionError(f"grader {grader.ref} returned value {grade.value} outside 0..1000")
    return grade


def require(condition: bool, item: Item, message: str) -> None:
    """Raise :class:`InvalidInput` about ``item``'s arguments unless ``condition`` holds."""
    if not condition:
        raise InvalidInput(f"item {item.id} ({item.grader}): {message}")


def arg(item: Item, name: str, typ: type | tuple[type, ...]) -> Any:
    value = item.args.get(name)
    require(
        isinstance(value, typ) and not (typ is int and isinstance(value, bool)),
        item,
        f"argument {name!r} must be {getattr(typ, '__name__', typ)}",
    )
    return value


def no_answer(response: Response) -> Grade:
    return failure(f"no answer: {response.error}" if response.error else "no answer")
