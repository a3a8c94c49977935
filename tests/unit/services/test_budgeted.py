"""Values kept within a count and a total weight, the least recently read dropped first, the last kept
always staying; a value that grows in place is weighed again."""

from __future__ import annotations

from trustscore.services.kept import Budgeted


def test_the_least_recently_read_go_first_past_the_count() -> None:
    kept = Budgeted[str, list[int]](count=2, weight=100, weigh=len)
    kept.put("a", [1])
    kept.put("b", [1])
    assert kept.get("a") == [1]  # read: now the most recent
    kept.put("c", [1])
    assert list(kept) == ["a", "c"] and kept.weight == 2
    assert kept.peek("a") == [1] and list(kept) == ["a", "c"]  # a peek moves nothing


def test_the_weight_bounds_what_is_kept_but_the_last_always_stays() -> None:
    kept = Budgeted[str, list[int]](count=10, weight=5, weigh=len)
    kept.put("a", [1, 2])
    kept.put("b", [1, 2])
    kept.put("c", [1, 2])  # 6 > 5: a goes
    assert list(kept) == ["b", "c"] and kept.weight == 4
    kept.put("big", list(range(9)))  # heavier than the budget alone: kept, every other dropped
    assert list(kept) == ["big"] and kept.weight == 9


def test_a_value_grown_in_place_is_weighed_again() -> None:
    kept = Budgeted[str, list[int]](count=10, weight=5, weigh=len)
    kept.put("a", [1])
    kept.put("b", [1])
    grown = kept.get("a")
    assert grown is not None
    grown.extend([2, 3, 4])
    kept.touched("a")
    assert kept.weight == 5 and list(kept) == ["b", "a"]
    grown.append(5)
    kept.touched("a")  # 6 > 5: b, read least recently, goes
    assert list(kept) == ["a"] and kept.weight == 5


def test_a_value_put_again_or_popped_leaves_no_weight_behind() -> None:
    kept = Budgeted[str, list[int]](count=10, weight=100, weigh=len)
    kept.put("a", [1, 2, 3])
    kept.put("a", [1])
    assert kept.weight == 1 and len(kept) == 1
    assert kept.pop("a") == [1] and kept.weight == 0 and "a" not in kept
    assert kept.pop("a") is None and kept.get("a") is None
    kept.touched("a")  # not kept: nothing to weigh
    assert kept.weight == 0


def test_the_oldest_are_dropped_while_stale_and_no_further() -> None:
    kept = Budgeted[str, int](count=10, weight=100, weigh=lambda v: v)
    for key, value in (("a", 1), ("b", 5), ("c", 2)):
        kept.put(key, value)
    kept.drop_oldest_while(lambda v: v < 3)  # a goes; b is not stale, so c, newer, stays though it is
    assert list(kept) == ["b", "c"] and kept.weight == 7
    kept.drop_oldest_while(lambda v: True)
    assert len(kept) == 0 and kept.weight == 0
