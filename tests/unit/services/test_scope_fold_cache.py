"""ScopeService keeps each agent's scope fold between reads; reads of one agent share it. A read whose
feed fails part-way (a leaf that cannot be folded) leaves the fold half-fed: no other read may serve it
or feed it again (a review reproduced runs counted twice). The store here is in memory, so that a read
can be held between taking its snapshot of the leaves and feeding them."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt

import msgspec
import pytest

from tests.unit.scope.test_collector import BROADER, DECL, card, closed, opened
from tests.unit.scope.test_report import AGENT
from trustscore.errors import InvalidInput
from trustscore.ledger.statements import ParsedStatement
from trustscore.services import scope as scope_module
from trustscore.services.scope import ScopeService

Leaf = tuple[int, ParsedStatement]


class Leaves:
    """The agent's leaves (already parsed: statements_of is the identity here); a read takes its
    snapshot, then waits for ``gate`` if one is set."""

    def __init__(self) -> None:
        self.leaves: list[Leaf] = []
        self.gate: asyncio.Event | None = None

    async def agent_leaves(self, agent: str, before: int | None = None, start: int = 0) -> list[Leaf]:
        snapshot = [(i, s) for i, s in self.leaves if i >= start]
        if self.gate is not None:
            await self.gate.wait()
        return snapshot


def bad_card(index: int) -> Leaf:
    """An agent card whose time cannot be read: its feed raises."""
    i, stmt = card(index, "bad", BROADER)  # a change of declarations: its time is read
    return i, dataclasses.replace(stmt, predicate=msgspec.structs.replace(stmt.predicate, issued_at="never"))


@pytest.fixture(autouse=True)
def parsed_already(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scope_module, "statements_of", lambda leaves: list(leaves))


async def test_a_half_fed_fold_is_never_served() -> None:
    store = Leaves()
    service = ScopeService(store, clock=lambda: dt.datetime(2026, 2, 1, tzinfo=dt.UTC))  # type: ignore[arg-type]
    store.leaves.append(card(0, "v1", DECL))
    assert (await service.view(AGENT)).runs == []
    store.leaves += [opened(1, DECL), closed(2, 1)]
    gate = store.gate = asyncio.Event()
    held = asyncio.create_task(service.view(AGENT))  # takes its snapshot (leaves 1 and 2) and waits
    await asyncio.sleep(0)
    store.leaves.append(bad_card(3))
    store.gate = None
    with pytest.raises(InvalidInput):
        await service.view(AGENT)  # feeds 1 and 2 into the shared fold, then fails at 3
    assert AGENT not in service._kept and service._kept.weight == 0
    gate.set()
    # The held read resumes with the half-fed fold: it starts again from an empty one, which meets the
    # same leaf that cannot be folded (before: it fed 1 and 2 again, served the run twice, kept the fold).
    with pytest.raises(InvalidInput):
        await held
    assert AGENT not in service._kept and service._kept.weight == 0


async def test_reads_of_one_agent_share_its_fold() -> None:
    store = Leaves()
    service = ScopeService(store, clock=lambda: dt.datetime(2026, 2, 1, tzinfo=dt.UTC))  # type: ignore[arg-type]
    store.leaves += [card(0, "v1", DECL), opened(1, DECL), closed(2, 1)]
    assert len((await service.view(AGENT)).runs) == 1
    store.leaves += [opened(3, DECL), closed(4, 3)]
    gate = store.gate = asyncio.Event()
    reads = [asyncio.create_task(service.view(AGENT)) for _ in range(3)]
    await asyncio.sleep(0)
    gate.set()
    views = await asyncio.gather(*reads)
    assert [len(v.runs) for v in views] == [2, 2, 2]  # each new run fed once
    assert service._kept.weight == 1 + 2  # one card version, two runs
