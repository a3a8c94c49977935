"""A rating's per-dimension rung distribution (LadderService.dimensions) from kept rows: the same as from
all the agent's rows of the log prefix, whatever the order of reads, and without reading them all again."""

from __future__ import annotations

import asyncio
import random
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from trustscore.ladder.rows import LadderRow
from trustscore.ladder.stats import by_dimension
from trustscore.services.ladder import LadderService

AGENTS = ("ts1_a", "ts1_b")


class _Store:
    """The ladder rows of a log that grows as the test appends; counts the rows each read returns."""

    def __init__(self, backfill: int = 0) -> None:
        self.rows: list[LadderRow] = []
        self.read = 0
        self.backfill = backfill
        self.rng = random.Random(0)

    async def backfill_below(self) -> int:
        return self.backfill

    async def scoring_rows(self, agent: str, start: int, end: int) -> list[LadderRow]:
        await asyncio.sleep(0) if self.rng.random() < 0.5 else None  # reads interleave at random
        found = [r for r in self.rows if r.agent == agent and start <= r.index < end and r.seq is not None]
        self.read += len(found)
        return found


def _row(index: int, seq: int | None, agent: str, draw: Any) -> LadderRow:
    return LadderRow(index=index, seq=seq, agent=agent, dimension=draw(st.sampled_from(["capability", "security"])),
                     rung=draw(st.integers(0, 4)), rule="r1", attested=draw(st.sampled_from(["self", "confirmed"])),
                     cover=f"c{draw(st.integers(0, 5))}", issuer=draw(st.sampled_from([None, "ts1_x"])),
                     outcome_detected=draw(st.booleans()), summary="s", kind="k")  # fmt: skip


def _expected(store: _Store, agent: str, size: int) -> Any:
    return by_dimension([r for r in store.rows if r.agent == agent and r.index < size])


@settings(max_examples=100, deadline=None)
@given(st.data())
def test_kept_rows_answer_as_all_rows(data: st.DataObject) -> None:
    async def run() -> None:
        store = _Store()
        service = LadderService(store, None, 5)  # type: ignore[arg-type]
        size = 0
        for _ in range(data.draw(st.integers(1, 12))):
            for _ in range(data.draw(st.integers(0, 4))):  # entries appended: rows of either agent
                agent = data.draw(st.sampled_from(AGENTS))
                for seq in range(data.draw(st.integers(1, 3))):
                    store.rows.append(_row(size, data.draw(st.sampled_from([seq, None])), agent, data.draw))
                size += 1
            asked = [(data.draw(st.sampled_from(AGENTS)), data.draw(st.integers(0, size))) for _ in range(3)]
            answers = await asyncio.gather(*(service.dimensions(a, s) for a, s in asked))  # concurrent reads
            for (agent, at), answer in zip(asked, answers, strict=True):
                assert answer == _expected(store, agent, at), (agent, at)

    asyncio.run(run())


async def test_a_read_at_a_moved_log_reads_only_the_rows_since() -> None:
    """Before, every rating body made read all of the agent's rows again (~34 ms at 10^4 items)."""
    store = _Store()
    store.rows = [LadderRow(index=i, seq=0, agent="ts1_a", dimension="capability", rung=i % 4, rule="r1",
                            attested="self", cover=f"c{i}", issuer=None, outcome_detected=True, summary="s",
                            kind="k") for i in range(1000)]  # fmt: skip
    service = LadderService(store, None, 5)  # type: ignore[arg-type]
    first = await service.dimensions("ts1_a", 1000)
    assert store.read == 1000
    for size in (1000, 1200, 5000):  # the log moved on; nothing of this agent's since
        assert await service.dimensions("ts1_a", size) == first
    assert store.read == 1000
    store.rows.append(LadderRow(index=5000, seq=0, agent="ts1_a", dimension="security", rung=3, rule="r1",
                                attested="confirmed", cover="new", issuer=None, outcome_detected=True,
                                summary="s", kind="k"))  # fmt: skip
    assert await service.dimensions("ts1_a", 5001) == _expected(store, "ts1_a", 5001)
    assert store.read == 1001  # the one new row


async def test_nothing_is_kept_while_old_entries_rows_are_backfilled() -> None:
    store = _Store(backfill=10)
    service = LadderService(store, None, 5)  # type: ignore[arg-type]
    store.rows = [LadderRow(index=20, seq=0, agent="ts1_a", dimension="capability", rung=1, rule="r1",
                            attested="self", cover="c", issuer=None, outcome_detected=True, summary="s",
                            kind="k")]  # fmt: skip
    await service.dimensions("ts1_a", 30)
    store.rows.insert(0, LadderRow(index=5, seq=0, agent="ts1_a", dimension="capability", rung=4, rule="r1",
                                   attested="self", cover="d", issuer=None, outcome_detected=True, summary="s",
                                   kind="k"))  # fmt: skip  # backfilled: below what was read
    store.backfill = 0
    assert await service.dimensions("ts1_a", 30) == _expected(store, "ts1_a", 30)
