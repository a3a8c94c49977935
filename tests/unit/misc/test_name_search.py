"""The agent search's index (trustscore.names.NameIndex.find and NameOrder): the same answers as a scan and
sort of every agent, whatever was renamed or registered since the order was made, without that scan."""

from __future__ import annotations

import hashlib
from collections.abc import ItemsView, Iterator

from hypothesis import given, settings
from hypothesis import strategies as st

from trustscore import names
from trustscore.names import Named, NameIndex, NameOrder, skeleton

NAMES = ["Pay Bot", "PayBot", "pay-b0t", "Scout", "scout", "Ledger Agent", "LEDGER", "Ali", "Al1", "ab", "AB"]


def _id(n: int) -> str:
    return "ts1_" + hashlib.sha1(str(n).encode()).hexdigest()


def _scan(index: NameIndex, query: str, limit: int) -> list[tuple[str, bool]]:
    """What the search answered before 2026-12-07: a scan and sort of every agent."""
    key, prefix = skeleton(query), query.lower()
    found = [
        (agent, named.skeleton == key or agent == prefix)
        for agent, named in index.agents.items()
        if (key and key in named.skeleton) or agent.startswith(prefix)
    ]
    found.sort(key=lambda f: (not f[1], index.agents[f[0]].name.casefold(), f[0]))
    return found[:limit]


def _order(index: NameIndex) -> None:
    agents, changes = index.snapshot()
    index.order(NameOrder.of(agents), changes)


_step = st.one_of(
    st.tuples(st.just("add"), st.integers(0, 30), st.sampled_from(NAMES)),
    st.tuples(st.just("order"), st.just(0), st.just("")),
    st.tuples(st.just("stale"), st.just(0), st.just("")),  # an order made, then installed after changes
    st.tuples(st.just("ids"), st.just(0), st.just("")),  # the sorted ids brought up to date
)
_query = st.one_of(
    st.sampled_from(["pay", "PAYBOT", "b0t", "scout", "ledger", "ali", "a", "ts1", "ts1_", "-", "zz", "AB"]),
    st.integers(0, 30).map(lambda n: _id(n)[: 4 + n % 7]),
    st.integers(0, 30).map(_id),
    st.text(min_size=1, max_size=6),
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(_step, max_size=40),
    st.lists(st.tuples(_query, st.integers(1, 12)), min_size=1, max_size=5),
    st.sampled_from([0, 1, 3, names.FEW_IDS]),
    st.sampled_from([0, 2, names.FEW_NEW]),
)
def test_find_answers_as_a_scan_of_every_agent(
    steps: list[tuple[str, int, str]], queries: list[tuple[str, int]], few_ids: int, few_new: int
) -> None:
    kept = names.FEW_IDS, names.FEW_NEW
    # Ids of a prefix ranked directly or looked up in the order beyond FEW_IDS; the ids not yet sorted in
    # looked at one by one, or the order's ids searched beyond FEW_NEW.
    names.FEW_IDS, names.FEW_NEW = few_ids, few_new
    try:
        _replay(steps, queries)
    finally:
        names.FEW_IDS, names.FEW_NEW = kept


def _replay(steps: list[tuple[str, int, str]], queries: list[tuple[str, int]]) -> None:
    index, log, pending = NameIndex(), 0, None
    for kind, n, name in steps:
        if kind == "add":
            index.add(log, _id(n), name)
            log += 1
        elif kind == "order":
            _order(index)
        elif kind == "ids":
            index.ids()
        elif pending is None:
            pending = index.snapshot()
        else:  # the snapshot taken earlier, installed now: agents changed since are still scanned
            index.order(NameOrder.of(pending[0]), pending[1])
            pending = None
        for query, limit in queries:
            assert index.find(skeleton(query), query.lower(), limit) == _scan(index, query, limit)


def test_an_older_order_installed_late_changes_nothing() -> None:
    index = NameIndex()
    index.add(0, _id(0), "Scout")
    old = index.snapshot()
    index.add(1, _id(0), "Ledger")
    _order(index)
    index.order(NameOrder.of(old[0]), old[1])  # made before the rename: not searched
    assert index.find(skeleton("scout"), "scout", 5) == []
    assert index.find(skeleton("ledger"), "ledger", 5) == [(_id(0), True)]
    assert index.unordered == 0


class _Counting(dict[str, Named]):
    """The index's agents, counting the names a search reads."""

    reads = 0

    def __getitem__(self, agent: str) -> Named:
        self.reads += 1
        return super().__getitem__(agent)

    def items(self) -> ItemsView[str, Named]:  # type: ignore[override]
        self.reads += len(self)
        return super().items()

    def __iter__(self) -> Iterator[str]:
        self.reads += len(self)
        return super().__iter__()


def test_a_query_matching_every_agent_reads_only_the_names_it_answers() -> None:
    """The attack: "ts1" matches every id. Before, each such search read and sorted every agent (~400 ms
    of the event loop at 10^5 agents); now it reads the names of the agents it answers."""
    index = NameIndex()
    for n in range(3_000):
        index.add(n, _id(n), f"Agent {n}")
    _order(index)
    for n in range(3_000, 3_010):  # registered since the order was made: scanned one by one
        index.add(n, _id(n), f"Agent {n}")
    counting = _Counting(index.agents)
    index.agents = counting
    for query in ("ts1", "agent", "Agent 2999", "nothing like it"):
        counting.reads = 0
        found = index.find(skeleton(query), query.lower(), 50)
        assert counting.reads <= 3 * (50 + 10), (query, counting.reads)
        assert found == _scan(index, query, 50)


def test_an_index_never_searched_keeps_no_list_of_changes() -> None:
    """Before any snapshot every agent is unordered by definition: a process that never serves a search
    (a worker, say) must not keep a second record of every agent registered (~100 MB at 10^6 agents)."""
    index = NameIndex()
    for n in range(1_000):
        index.add(n, _id(n), f"Agent {n}")
    index.add(1_000, _id(3), "Renamed")
    assert index._unordered == {}  # the memory this test is about
    assert index.unordered == 1_000 and not index.ordered
    assert index.find(skeleton("renamed"), "renamed", 5) == [(_id(3), True)]
    agents, changes = index.snapshot()
    index.add(1_001, _id(4), "Late")  # changed after the snapshot: recorded, scanned after the order
    index.order(NameOrder.of(agents), changes)
    assert index.unordered == 1
    assert index.find(skeleton("late"), "late", 5) == [(_id(4), True)]
