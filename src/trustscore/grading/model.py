"""The inputs and output of a grader: an exam item, the agent's response, and the grade.

Grades are integer millis (0..1000) so they can travel in signed payloads without floats.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec

AskKind = Literal["single", "repeat", "paraphrase", "dialogue"]
Result = Literal["success", "partial", "failure"]
Tier = Literal["public", "private"]
MAX_MILLIS = 1000


class Ask(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """How an item is put to the agent.

    ``single``: one prompt, one answer. ``repeat``: the same prompt asked ``times`` times in fresh
    conversations. ``paraphrase``: each prompt asked once in a fresh conversation. ``dialogue``: the
    prompt is a briefing and the grader's scripted counterpart takes turns with the agent.
    """

    kind: AskKind
    prompts: list[str]
    times: int = 1


class Item(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """One exam item: its stable id, dimension, tier, grader ``name@version`` and the grader's arguments."""

    id: str
    dimension: str
    tier: Tier
    grader: str
    ask: Ask
    args: dict[str, Any] = {}
    timeout_ms: int | None = None


class Turn(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """One answer of the agent, exactly as received, and how long it took."""

    output: str
    elapsed_ms: int


class Response(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """Everything the agent said for one item; ``error`` says why the answers stop early, if they do."""

    turns: list[Turn] = []
    error: str | None = None


class Grade(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """A grade: ``value`` in millis (0..1000), a result class, a one-line reason and named facets."""

    value: int
    result: Result
    detail: str = ""
    facets: dict[str, int] = {}

    @property
    def fraction(self) -> float:
        """The value as a number in 0..1, for display only (never signed)."""
        return self.value / MAX_MILLIS


class ItemGrade(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    item_id: str
    dimension: str
    grader: str
    grade: Grade


def success(detail: str = "", **facets: int) -> Grade:
    return Grade(MAX_MILLIS, "success", detail, facets)


def failure(detail: str, **facets: int) -> Grade:
    return Grade(0, "failure", detail, facets)


def partial(value: int, detail: str, **facets: int) -> Grade:
    return Grade(max(0, min(MAX_MILLIS, value)), "partial", detail, facets)


def outputs(response: Response) -> list[str]:
    return [t.output for t in response.turns]


def to_builtins(value: Any) -> Any:
    return msgspec.to_builtins(value)
