"""A page of entries counts only the entries whose lengths it read: one committed between its two
queries (the lengths, then the leaves) is left to the next page, never returned uncounted."""

from __future__ import annotations

from typing import Any

from trustscore.store.log import LogStore


class _Pool:
    """Answers the lengths query with ``lengths``; records the leaves query's range."""

    def __init__(self, lengths: list[tuple[int, int]]) -> None:
        self.lengths = lengths
        self.ranges: list[tuple[int, int]] = []

    async def fetch(self, query: str, start: int, end: int) -> list[dict[str, Any]]:
        if "octet_length" in query:
            return [{"idx": i, "n": n} for i, n in self.lengths if start <= i < end]
        self.ranges.append((start, end))
        # The log grew meanwhile: entries past those whose lengths were read exist now (1 MiB each).
        return [{"idx": i, "leaf": b"x", "leaf_hash": b"h" * 32} for i in range(start, min(end, 1000))]


async def test_entries_committed_between_the_queries_are_not_returned_uncounted() -> None:
    pool = _Pool([(10, 100), (11, 100)])  # the tail, as the lengths query saw it
    rows = await LogStore(pool).entries(10, 1010, max_bytes=4096)  # type: ignore[arg-type]
    assert pool.ranges == [(10, 12)] and [r.index for r in rows] == [10, 11]


async def test_a_page_is_cut_once_its_leaves_hold_the_budget() -> None:
    pool = _Pool([(i, 1000) for i in range(10, 20)])
    rows = await LogStore(pool).entries(10, 20, max_bytes=2500)  # type: ignore[arg-type]
    assert pool.ranges == [(10, 13)] and len(rows) == 3  # 3,000 bytes: the third began below the budget


async def test_nothing_to_read_is_an_empty_page_without_a_second_query() -> None:
    pool = _Pool([])
    assert await LogStore(pool).entries(10, 20, max_bytes=2500) == []  # type: ignore[arg-type]
    assert pool.ranges == []
