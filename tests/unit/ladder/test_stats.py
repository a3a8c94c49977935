"""Outcome stats (issue #13): n beside every rate, a floor, null is not zero, the stronger row kept."""

from __future__ import annotations

import pytest

from trustscore.errors import InvalidInput
from trustscore.ladder.rows import LadderRow
from trustscore.ladder.stats import (
    BELOW_FLOOR,
    NO_OUTCOME_DETECTION,
    by_dimension,
    outcome_stats,
    strongest,
)


def row(i: int, rung: int, *, model: str = "m", detected: bool = True, **kw: object) -> LadderRow:
    fields: dict[str, object] = {
        "index": i,
        "seq": 0,
        "agent": f"agent-{i}",
        "dimension": "delivery",
        "rung": rung,
        "rule": "ladder-rule@1",
        "attested": "self",
        "cover": f"work:T-{i}",
        "issuer": f"agent-{i}",
        "outcome_detected": detected,
        "summary": "",
        "kind": "work-record",
        "model": model,
    }
    fields.update(kw)
    return LadderRow(**fields)  # type: ignore[arg-type]


def test_a_group_of_19_is_suppressed_and_a_group_of_20_shown_with_its_n() -> None:
    rows = [row(i, 3 if i % 2 else 1, model="small") for i in range(19)]
    rows += [row(100 + i, 3 if i < 15 else 1, model="big") for i in range(20)]
    stats = outcome_stats(rows, "model", 20, log_size=1000)
    big, small = stats.groups
    assert (big.group, big.stats.n, big.stats.verified, big.stats.rate) == ("big", 20, 15, 0.75)
    assert big.stats.reason is None
    assert big.stats.rungs is not None and big.stats.rungs["test_or_build_passed"] == 15
    assert (small.group, small.stats.n, small.stats.rate, small.stats.verified) == ("small", 19, None, None)
    assert small.stats.reason == BELOW_FLOOR and small.stats.rungs is None


def test_the_floor_is_configurable() -> None:
    rows = [row(i, 3) for i in range(5)]
    assert outcome_stats(rows, "model", 5, 0).groups[0].stats.rate == 1.0
    assert outcome_stats(rows, "model", 6, 0).groups[0].stats.reason == BELOW_FLOOR
    with pytest.raises(InvalidInput, match="floor"):
        outcome_stats(rows, "model", 0, 0)
    with pytest.raises(InvalidInput, match="group_by"):
        outcome_stats(rows, "colour", 20, 0)


def test_null_is_not_zero_both_ways() -> None:
    undetected = [row(i, 1, model="blind", detected=False) for i in range(25)]
    failing = [row(100 + i, 2, model="failing") for i in range(25)]
    blind, fails = sorted(outcome_stats(undetected + failing, "model", 20, 0).groups, key=lambda g: g.group)
    assert (blind.stats.rate, blind.stats.reason, blind.stats.n) == (None, NO_OUTCOME_DETECTION, 25)
    assert (fails.stats.rate, fails.stats.reason, fails.stats.verified) == (0.0, None, 0)


def test_the_stronger_row_is_kept_not_the_newer() -> None:
    ci = row(1, 5, attested="confirmed", issuer="ci-key", agent="a", cover="work:T")
    later_self = row(2, 1, agent="a", cover="work:T", issuer="a")
    assert strongest([ci, later_self]) == [ci]
    # a reporter's own later row corrects its earlier one
    corrected = row(3, 2, attested="confirmed", issuer="ci-key", agent="a", cover="work:T")
    assert strongest([ci, later_self, corrected]) == [corrected]
    # at the same rung a confirmed row beats a self-attested one
    same = row(4, 2, agent="a", cover="work:T", issuer="a")
    assert strongest([corrected, same]) == [corrected]


def test_rows_without_the_grouping_field_are_in_no_group() -> None:
    rows = [row(i, 3, exam="capability") for i in range(3)] + [row(9, 3, exam=None)]
    stats = outcome_stats(rows, "exam", 1, 0)
    assert [(g.group, g.stats.n) for g in stats.groups] == [("capability", 3)]


def test_per_dimension_distribution_counts_only_rows_that_are_evidence() -> None:
    rows = [row(1, 3, agent="a"), row(2, 0, agent="a", seq=None), row(3, 5, agent="a", dimension="economic")]
    dims = by_dimension(rows)
    assert sorted(dims) == ["delivery", "economic"]
    assert (dims["delivery"].n, dims["delivery"].verified, dims["delivery"].rate) == (1, 1, 1.0)
