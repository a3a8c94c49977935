"""Outcome stats (issue #13): n beside every rate, a floor, null is not zero, the stronger row kept."""

from __future__ import annotations

import msgspec
import pytest

from trustscore.errors import InvalidInput
from trustscore.ladder.rows import LadderRow
from trustscore.ladder.rule import RUNG_NAMES
from trustscore.ladder.stats import (
    BELOW_FLOOR,
    GROUP_BY,
    NO_OUTCOME_DETECTION,
    Tally,
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


def test_an_agents_own_higher_rung_never_replaces_another_reporters_row() -> None:
    """A CI party confirmed task T failed (rung 0); the agent then posted a self-attested record of T
    naming a CI "confirmation" of its own making (rung 5). Ordered by rung first, the agent's row stood:
    the outcome stats went from confirmed 1, verified 0 to confirmed 0, verified 1 (found by review)."""
    failed = row(1, 0, attested="confirmed", issuer="ci-key", agent="a", cover="work:T", detected=True)
    claimed = row(2, 5, agent="a", cover="work:T", issuer="a")
    assert strongest([failed, claimed]) == [failed]
    assert strongest([claimed, failed]) == [failed]
    stats = outcome_stats([failed, claimed], "model", 1, log_size=3).groups[0].stats
    assert (stats.verified, stats.confirmed, stats.rate) == (0, 1, 0.0)


def test_rows_without_the_grouping_field_are_in_no_group() -> None:
    rows = [row(i, 3, exam="capability") for i in range(3)] + [row(9, 3, exam=None)]
    stats = outcome_stats(rows, "exam", 1, 0)
    assert [(g.group, g.stats.n) for g in stats.groups] == [("capability", 3)]


def test_per_dimension_distribution_counts_only_rows_that_are_evidence() -> None:
    rows = [row(1, 3, agent="a"), row(2, 0, agent="a", seq=None), row(3, 5, agent="a", dimension="economic")]
    dims = by_dimension(rows)
    assert sorted(dims) == ["delivery", "economic"]
    assert (dims["delivery"].n, dims["delivery"].verified, dims["delivery"].rate) == (1, 1, 1.0)


def _reference(rows: list[LadderRow], group_by: str, floor: int) -> list[tuple[str, dict[str, object]]]:
    """The outcome stats as first written: per group of the standing rows, its distribution read off its
    rows (each (grouping, floor) a pass of its own)."""
    groups: dict[str, list[LadderRow]] = {}
    for r in strongest(rows):
        label = getattr(r, group_by)
        if label is not None:
            groups.setdefault(label, []).append(r)
    out: list[tuple[str, dict[str, object]]] = []
    for g in sorted(groups):
        d: dict[str, object]
        members = groups[g]
        n = len(members)
        rungs = {name: sum(1 for r in members if r.rung == i) for i, name in enumerate(RUNG_NAMES)}
        confirmed = sum(1 for r in members if r.attested != "self")
        if not any(r.outcome_detected for r in members):
            d = {"n": n, "verified": None, "rate": None, "reason": "no_outcome_detection", "rungs": rungs,
                 "confirmed": confirmed}  # fmt: skip
        elif n < floor:
            d = {
                "n": n,
                "verified": None,
                "rate": None,
                "reason": "below_floor",
                "rungs": None,
                "confirmed": None,
            }
        else:
            verified = sum(1 for r in members if r.rung >= 3)
            d = {"n": n, "verified": verified, "rate": verified / n, "reason": None, "rungs": rungs,
                 "confirmed": confirmed}  # fmt: skip
        out.append((g, d))
    return out


@pytest.mark.parametrize("seed", range(30))
def test_one_tally_answers_every_grouping_and_floor_as_a_pass_of_its_own(seed: int) -> None:
    """services/ladder.py answers every (grouping, floor) from one Tally of the log; a floor changed at
    each request used to read the whole log each time."""
    import random

    rng = random.Random(seed)
    rows = [
        LadderRow(
            index=i // 2,
            seq=i % 2 if rng.random() < 0.8 else None,
            agent=rng.choice("ab"),
            dimension=rng.choice(("delivery", "capability")),
            rung=rng.randrange(6),
            rule=rng.choice(("ladder-rule@0", "ladder-rule@1")),
            attested=rng.choice(("self", "confirmed", "server")),
            cover=rng.choice(("t1", "t2", "t3")),
            issuer=rng.choice((None, "x", "y")),
            outcome_detected=rng.random() < 0.7,
            summary="",
            kind="k",
            model=rng.choice((None, "m1", "m2")),
            adapter=rng.choice((None, "a1")),
            exam=rng.choice((None, "e1", "e2")),
            marketplace=rng.choice((None, "mk")),
        )
        for i in range(rng.randrange(0, 60))
    ]
    tally = Tally.of(rows, 99)
    for group_by in GROUP_BY:
        for floor in (1, 2, 3, 5, 20):
            got = tally.stats(group_by, floor)
            assert [(g.group, msgspec.to_builtins(g.stats)) for g in got.groups] == _reference(
                rows, group_by, floor
            )
            assert got == outcome_stats(rows, group_by, floor, 99)
            assert got.rules == sorted({r.rule for r in strongest(rows)}) and got.log_size == 99


def test_groups_come_a_page_at_a_time_in_name_order() -> None:
    """Model and adapter names are free text: one stats answer listed every group ever named (10^4
    adapters of 2,000 characters: ~20 MB a request). Now at most ``limit`` groups after ``after``, and
    ``next`` names the last one given when more follow."""
    names = [f"model-{i:03d}" for i in range(25)]
    tally = Tally.of([row(i, 3, model=name) for i, name in enumerate(names)], 99)
    whole = tally.stats("model", 1)
    assert [g.group for g in whole.groups] == names and whole.next is None
    seen, after = [], None
    while True:
        page = tally.stats("model", 1, limit=10, after=after)
        assert len(page.groups) <= 10 and page.log_size == 99
        seen += page.groups
        if page.next is None:
            break
        assert page.next == page.groups[-1].group
        after = page.next
    assert seen == whole.groups
    assert tally.stats("model", 1, limit=25).next is None  # exactly the rest: no next page to ask for
    assert [g.group for g in tally.stats("model", 1, limit=3, after="model-0105").groups] == names[11:14]
    assert tally.stats("model", 1, after="zzz").groups == []
    with pytest.raises(InvalidInput, match="limit"):
        tally.stats("model", 1, limit=0)
