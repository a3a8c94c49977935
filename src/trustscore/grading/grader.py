"""What a grader version is, and the helpers graders share to check their items' arguments.

Grader modules build :class:`Grader` values from this module alone; ``registry.py`` imports every grader
module and indexes their graders, so the registry depends on the graders and never the other way round.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trustscore.errors import InvalidInput
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
