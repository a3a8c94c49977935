"""Compare the grades a report earned with the grades its endpoint earns now, by fixed tolerances.

An item matches when its observed grade is within ``ITEM_TOLERANCE_MILLIS`` of the reported one (the
graders are deterministic; the slack is for agents that are not, e.g. sampling LLMs). A run matches when
at least ``RUN_THRESHOLD_MILLIS`` (share x 1000) of its sampled items match. A run in which no item got
any answer is ``unreachable``. These numbers are part of ``reverification/v1``: changing them is a new
kind version. Rationale: docs/reverification.md.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from trustscore.errors import InvalidInput

ITEM_TOLERANCE_MILLIS = 100
RUN_THRESHOLD_MILLIS = 900
Outcome = Literal["match", "mismatch", "unreachable"]


@dataclass(frozen=True)
class ItemComparison:
    item_id: str
    reported_millis: int
    observed_millis: int | None  # None: the endpoint gave no answer at all
    matched: bool


@dataclass(frozen=True)
class Comparison:
    items: tuple[ItemComparison, ...]
    matched_millis: int  # share of matching items x 1000, rounded down
    outcome: Outcome


def item_matches(reported_millis: int, observed_millis: int | None) -> bool:
    return observed_millis is not None and abs(reported_millis - observed_millis) <= ITEM_TOLERANCE_MILLIS


def share_millis(matched: int, total: int) -> int:
    if total <= 0 or not 0 <= matched <= total:
        raise InvalidInput("a share needs 0 <= matched <= total and total >= 1")
    return matched * 1000 // total


def outcome_of(matched_millis: int, answered: int) -> Outcome:
    if answered == 0:
        return "unreachable"
    return "match" if matched_millis >= RUN_THRESHOLD_MILLIS else "mismatch"


def compare(pairs: Sequence[tuple[str, int, int | None]]) -> Comparison:
    """``pairs`` of (item id, reported millis, observed millis or None), in sample order."""
    if not pairs:
        raise InvalidInput("a comparison needs at least one sampled item")
    for item_id, reported, observed in pairs:
        if not 0 <= reported <= 1000 or (observed is not None and not 0 <= observed <= 1000):
            raise InvalidInput(f"item {item_id}: grades must be 0..1000 millis")
    items = tuple(ItemComparison(i, r, o, item_matches(r, o)) for i, r, o in pairs)
    share = share_millis(sum(c.matched for c in items), len(items))
    answered = sum(c.observed_millis is not None for c in items)
    return Comparison(items, share, outcome_of(share, answered))
