"""Outcome stats read the log's ladder rows once per tally, not once per (grouping, floor) and request.

``GET /v1/stats/outcomes`` read every ladder row of the log for each (grouping, floor) not cached at the
current size, and kept at most 64 of them: a public reader changing ``floor`` (1..10^6) at each request
made the server read the whole log each time, and every request after an append did too. Now every
grouping and floor is answered from one tally, made at most once per size and no sooner than
TALLY_SPACING times the last making after it, shared by the callers that wait for it.
"""

from __future__ import annotations

import asyncio
import gc
import logging

import asyncpg
import pytest

from trustscore.errors import Conflict, InvalidInput
from trustscore.ladder.stats import GROUP_BY
from trustscore.services import ladder as ladder_service
from trustscore.services.ladder import LadderService
from trustscore.store.ladder import LadderStore
from trustscore.store.projection_tables import ProjectionStore


class _Rows(LadderStore):
    """The real store, counting its reads of the whole log (and letting a test hold one)."""

    reads = 0
    hold: asyncio.Event | None = None

    fail = False

    async def records(self, end: int) -> list[asyncpg.Record]:
        self.reads += 1
        if self.hold is not None:
            await self.hold.wait()
        if self.fail:
            raise ConnectionError("the database went away")
        return await super().records(end)


class _Size(ProjectionStore):
    """The real store; the projected size a test moves (the rows read stay the real, empty, ones)."""

    size = 0
    gates: list[asyncio.Event] = []  # noqa: RUF012 - set per test: each read waits for the next gate

    async def projected_size(self) -> int:
        if self.gates:
            await self.gates.pop(0).wait()
        return self.size


def _service(pool: asyncpg.Pool) -> tuple[LadderService, _Rows, _Size]:
    rows, size = _Rows(pool), _Size(pool)
    return LadderService(rows, size, 20), rows, size


async def test_every_grouping_and_floor_is_answered_from_one_read(pool: asyncpg.Pool) -> None:
    service, rows, _ = _service(pool)
    for floor in range(1, 200):
        for group_by in GROUP_BY:
            assert (await service.outcomes(group_by, floor)).floor == floor
    assert rows.reads == 1  # before: 199 * 4 reads of every ladder row (64 kept at most)


async def test_a_new_tally_waits_for_the_spacing_and_says_the_size_it_holds_for(
    pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    service, rows, size = _service(pool)
    monkeypatch.setattr(ladder_service, "TALLY_SPACING", 1e9)  # as if the last making took long
    assert (await service.outcomes("model")).log_size == 0
    size.size = 5  # the log moved on
    stale = await service.outcomes("model", 3)
    assert (stale.log_size, rows.reads) == (0, 1)  # served as it was, and saying so
    service._next_tally = 0.0  # the spacing has passed
    assert (await service.outcomes("model")).log_size == 5 and rows.reads == 2
    assert (await service.outcomes("exam", 7)).log_size == 5 and rows.reads == 2  # the same size: kept


async def test_callers_share_one_making_and_one_leaving_stops_nobody(pool: asyncpg.Pool) -> None:
    service, rows, size = _service(pool)
    rows.hold = asyncio.Event()
    size.size = 3
    first = asyncio.ensure_future(service.outcomes("model"))
    await asyncio.sleep(0.05)
    others = [asyncio.ensure_future(service.outcomes(g, f)) for g in GROUP_BY for f in (1, 50)]
    await asyncio.sleep(0.05)
    first.cancel()  # its reader went away: the making goes on for the others
    rows.hold.set()
    answers = await asyncio.gather(*others)
    assert {a.log_size for a in answers} == {3} and rows.reads == 1
    with pytest.raises(asyncio.CancelledError):
        await first


async def test_a_size_read_that_answers_after_a_making_does_not_make_another(
    pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review: a caller compared its size with the tally it saw before its size read; a making that ended
    meanwhile (and set the spacing) was ignored, and each such caller read the whole log again."""
    monkeypatch.setattr(ladder_service, "TALLY_SPACING", 1e9)
    service, rows, size = _service(pool)
    size.gates = [asyncio.Event() for _ in range(3)]
    gates = list(size.gates)
    callers = [asyncio.ensure_future(service.outcomes("model", f)) for f in (1, 2, 3)]
    await asyncio.sleep(0.05)  # all three wait for their size reads
    gates[0].set()
    first = await callers[0]  # its making has ended
    gates[1].set()
    gates[2].set()
    assert [a.log_size for a in await asyncio.gather(*callers[1:])] == [first.log_size] * 2
    assert rows.reads == 1  # 3 before


async def test_a_failed_making_is_surfaced_spaced_and_read(
    pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    service, rows, size = _service(pool)
    assert (await service.outcomes("model")).log_size == 0
    monkeypatch.setattr(ladder_service, "TALLY_SPACING", 1e9)
    service._next_tally, size.size, rows.fail = 0.0, 4, True
    with pytest.raises(ConnectionError):
        await service.outcomes("model")
    assert (await service.outcomes("exam")).log_size == 0  # spaced: the kept tally, not another read
    assert rows.reads == 2
    # The only caller goes away and the making fails: its error is still read (no asyncio warning).
    service._next_tally, rows.hold = 0.0, asyncio.Event()
    caller = asyncio.ensure_future(service.outcomes("model"))
    await asyncio.sleep(0.05)
    caller.cancel()
    rows.hold.set()
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        await asyncio.sleep(0.05)
        gc.collect()
        await asyncio.sleep(0)
    assert "never retrieved" not in caplog.text


async def test_later_pages_come_from_the_first_pages_tally_while_it_is_kept(
    pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Review: a reader paging through many groups while the log moved got pages of two tallies. A page
    naming the first page's log size comes from that tally while it is one of the last KEPT_TALLIES."""
    monkeypatch.setattr(ladder_service, "TALLY_SPACING", 0.0)  # a new tally at every move
    service, _, size = _service(pool)
    assert (await service.outcomes("model")).log_size == 0
    size.size = 5
    assert (await service.outcomes("model")).log_size == 5
    assert (await service.outcomes("exam", 3, log_size=0)).log_size == 0  # the first page's tally
    for n in range(6, 6 + ladder_service.KEPT_TALLIES - 1):
        size.size = n
        await service.outcomes("model")
    assert (await service.outcomes("model", log_size=5)).log_size == 5  # still one of the last two
    with pytest.raises(Conflict, match="ask for the first page again"):
        await service.outcomes("model", log_size=0)
    with pytest.raises(Conflict):
        await service.outcomes("model", log_size=4)  # never made


async def test_a_log_size_past_the_projected_log_is_the_callers_mistake(pool: asyncpg.Pool) -> None:
    """A review found `log_size` 100,000 of a 152-entry log answered 409 "no longer kept (the log moved
    on)", which sends a client back to the first page for a size that never was: it is 400 now. A size the
    log had stays 409 (another API process may have made that tally)."""
    service, _, size = _service(pool)
    size.size = 5
    assert (await service.outcomes("model")).log_size == 5
    with pytest.raises(InvalidInput, match="past the projected log"):
        await service.outcomes("model", log_size=6)
    with pytest.raises(Conflict):
        await service.outcomes("model", log_size=3)
