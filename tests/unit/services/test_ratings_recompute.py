"""The periodic full recompute runs in a worker thread; what it publishes must be what the event loop
would have computed, and it must never overwrite a newer rating made meanwhile from newer evidence."""

from __future__ import annotations

import asyncio
import datetime as dt
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import msgspec
import pytest

from trustscore.kinds.graded import DIMENSIONS
from trustscore.scoring.inputs import EvidenceItem, Snapshot
from trustscore.scoring.ratings import score_agents
from trustscore.services import ratings as ratings_module
from trustscore.services.metrics import Metrics
from trustscore.services.ratings import (
    OFF_LOOP_AGENTS,
    OFF_LOOP_ITEMS,
    RELEASED_MODELS,
    RatingService,
    _AgentData,
    load_models,
)
from trustscore.settings import SERVABLE_MODELS
from trustscore.store.projection_tables import EvidenceRow

T = TypeVar("T")
AT = dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC)
ALICE = "ts1_" + "a" * 40
BOB = "ts1_" + "b" * 40


def item(agent: str, value: float, n: int) -> EvidenceItem:
    dimension = DIMENSIONS[n % len(DIMENSIONS)]
    return EvidenceItem(
        agent=agent,
        dimension=dimension,
        source="real-benchmark",
        at=AT - dt.timedelta(days=n % 20),
        value=value,
        key=f"{dimension}@1/q{n}",
        issuer=f"ts1_{n:040x}",
    )


def service(clock: Any = lambda: AT, models: tuple[str, ...] = RELEASED_MODELS) -> RatingService:
    ratings = RatingService(None, load_models(names=models), Metrics(), clock=clock)  # type: ignore[arg-type]
    index = 0
    for agent, value in ((ALICE, 90.0), (BOB, 30.0)):
        data = ratings._agents[agent] = _AgentData()
        for n in range(40):
            data.evidence.append((index, item(agent, value, n)))
            index += 1
    ratings.size = index
    return ratings


def totals(ratings: RatingService, model: str) -> dict[str, Any]:
    return {a: ratings.stored(a, model).rating for a in (ALICE, BOB)}  # type: ignore[union-attr]


async def test_threaded_full_recompute_equals_the_one_on_the_loop() -> None:
    on_loop, threaded = service(), service()
    on_loop.recompute()
    await threaded.recompute_all()
    for model in on_loop.models:
        assert totals(threaded, model) == totals(on_loop, model)
        assert totals(threaded, model)[ALICE].total is not None


async def test_a_rating_refreshed_during_the_recompute_is_kept() -> None:
    ratings = service()
    ratings.recompute()
    entered, release = threading.Event(), threading.Event()
    score = ratings._refresh_states

    def slow_score(*args: Any) -> Any:
        if threading.current_thread() is not threading.main_thread():  # the worker, not the loop
            entered.set()
            assert release.wait(10)
        return score(*args)

    ratings._refresh_states = slow_score  # type: ignore[method-assign,assignment]
    task = asyncio.create_task(ratings.recompute_all())
    while not entered.is_set():  # the loop keeps running while the thread scores
        await asyncio.sleep(0.001)
    # Meanwhile new evidence about Bob arrives and is refreshed on the loop (as refresh() does).
    for n in range(40, 80):
        ratings._agents[BOB].evidence.append((ratings.size, item(BOB, 100.0, n)))
        ratings.size += 1
    ratings.recompute([BOB])
    bob_now = ratings.stored(BOB).rating  # type: ignore[union-attr]
    release.set()
    await task
    assert ratings.stored(BOB).rating == bob_now  # type: ignore[union-attr]  # not the stale one
    assert bob_now.total is not None and bob_now.total > 60  # 40 items at 30 then 40 at 100
    assert ratings.stored(ALICE) is not None


class GatedStore:
    """Projected rows behind a snapshot read that waits for a gate, or fails once."""

    def __init__(self, rows: list[EvidenceRow]) -> None:
        self.rows = rows
        self.gate = asyncio.Event()
        self.fail_once = False

    async def projected_size(self) -> int:
        return len(self.rows)

    async def evidence_since(self, start: int, end: int) -> list[EvidenceRow]:
        return self.rows[start:end]

    async def snapshots_since(self, start: int, end: int) -> list[Any]:
        if self.fail_once:
            self.fail_once = False
            raise ConnectionError("database went away")
        await self.gate.wait()
        return []


def gated() -> tuple[GatedStore, RatingService]:
    store = GatedStore([EvidenceRow(i, 0, item(ALICE, 80.0, i)) for i in range(40)])
    ratings = RatingService(store, load_models(), Metrics(), clock=lambda: AT)  # type: ignore[arg-type]
    return store, ratings


async def test_a_refresh_applies_nothing_until_it_has_read_everything() -> None:
    """A full recompute starting while a refresh waits on the database must not see evidence beyond
    the log size its ratings will name."""
    store, ratings = gated()
    refresh = asyncio.create_task(ratings.refresh())
    await asyncio.sleep(0.01)  # the refresh now waits on the snapshot read
    assert ratings._agents == {} and ratings.size == 0
    await ratings.recompute_all()  # sees nothing yet: publishes nothing
    assert ratings.stored(ALICE) is None
    store.gate.set()
    assert await refresh == {ALICE}
    assert ratings.size == 40 and len(ratings._agents[ALICE].evidence) == 40


async def test_a_failed_refresh_leaves_nothing_half_applied() -> None:
    store, ratings = gated()
    store.fail_once = True
    with pytest.raises(ConnectionError):
        await ratings.refresh()
    assert ratings._agents == {} and ratings.size == 0
    store.gate.set()
    await ratings.refresh()
    assert len(ratings._agents[ALICE].evidence) == 40  # once, not twice


class SlowStore:
    """Projected evidence of ALICE at [0, 10), read with a pause (so two refreshes overlap)."""

    async def projected_size(self) -> int:
        await asyncio.sleep(0.01)
        return 10

    async def evidence_since(self, start: int, end: int) -> list[EvidenceRow]:
        await asyncio.sleep(0.01)
        return [EvidenceRow(i, 0, item(ALICE, 80.0, i)) for i in range(start, end)]

    async def snapshots_since(self, start: int, end: int) -> list[Any]:
        return []


async def test_two_refreshes_at_once_add_each_projected_row_once() -> None:
    """The projector and the snapshot job both refresh; overlapping, they must not both add the rows
    (the snapshot job refreshes first so that a worker that just took the lease signs current ratings)."""
    ratings = RatingService(SlowStore(), load_models(), Metrics(), clock=lambda: AT)  # type: ignore[arg-type]
    await asyncio.gather(ratings.refresh(), ratings.refresh(), ratings.refresh())
    assert len(ratings._agents[ALICE].evidence) == 10 and ratings.size == 10


def spread(agent: str, value: float, n: int, days: float) -> EvidenceItem:
    """An item ``days`` after AT (negative: before); three in a row of one dimension share a key."""
    dimension = DIMENSIONS[n % len(DIMENSIONS)]
    return EvidenceItem(
        agent=agent,
        dimension=dimension,
        source=("real", "verified", "self-reported")[n % 3],
        at=AT + dt.timedelta(days=days),
        value=value,
        key=f"{dimension}@1/q{n // (3 * len(DIMENSIONS))}",
        issuer=f"ts1_{n % 5:040x}",
    )


async def test_the_time_refresh_equals_a_full_recompute_as_time_and_evidence_move() -> None:
    """Kept states (scoring/refresh.py) against the engine over every row, every served model and its
    medals: rows becoming due, time going back, evidence and new agents arriving between refreshes."""
    now = [AT]
    models = load_models(names=SERVABLE_MODELS)
    kept = RatingService(None, models, Metrics(), clock=lambda: now[0])  # type: ignore[arg-type]
    full = RatingService(None, models, Metrics(), clock=lambda: now[0])  # type: ignore[arg-type]
    agents = [f"ts1_{i:040x}" for i in range(12)]
    index = 0

    def arrive(rounds: int, first: int) -> None:
        nonlocal index
        for r in range(rounds):
            for i, agent in enumerate(agents[: first + r]):
                n = index
                value = 1.0 - ((i * 37 + n * 11) % 100) / (100.0 if i % 2 else 1000.0)  # even agents near 1
                days = ((n * 7919) % 90) - 60.0 + (n % 4) * 0.37  # some after AT: due later
                for s in (kept, full):
                    s._agents.setdefault(agent, _AgentData()).evidence.append(
                        (index, spread(agent, value, n, days))
                    )
                index += 1
        for s in (kept, full):
            s.size = index

    outcomes: set[str | None] = set()

    def check() -> None:
        full.recompute()
        outcomes.update(
            m.medal or m.reason
            for r in kept.all("trustscore-v3")
            if r.medals
            for m in r.medals.dimensions.values()
        )
        for model in kept.models:
            for agent in kept._agents:
                got, want = kept.stored(agent, model), full.stored(agent, model)
                assert got is not None and want is not None
                assert (got.rating, got.medals) == (want.rating, want.medals), (model, agent, now[0])

    arrive(40, 4)
    for when in (AT, AT + dt.timedelta(days=3), AT + dt.timedelta(days=31)):
        now[0] = when
        await kept.recompute_all()
        check()
    arrive(10, 9)  # new agents, and rows for old ones
    for when in (AT + dt.timedelta(days=31), AT - dt.timedelta(days=10), AT + dt.timedelta(days=400)):
        now[0] = when
        await kept.recompute_all()
        check()
    # Snapshots of every model (baseline-v0.3 reads its own; v2 and v3 read none), one agent with
    # snapshots only, some dated after the rating time: a snapshot-only change re-reads no rows of a
    # model that reads no snapshots, and must still give the full recompute.
    for round_ in range(3):
        for i, agent in enumerate([*agents[:6], "ts1_" + "c" * 40]):
            for model in SERVABLE_MODELS:
                taken = Snapshot(
                    agent=agent,
                    at=AT + dt.timedelta(days=390 + 3 * round_ + i * 0.5),
                    total=400 + 37 * i + 11 * round_,
                    model_version=model,
                )
                for s in (kept, full):
                    s._agents.setdefault(agent, _AgentData()).snapshots.append(taken)
        for when in (AT + dt.timedelta(days=400), AT + dt.timedelta(days=392), AT + dt.timedelta(days=402)):
            now[0] = when
            await kept.recompute_all()
            check()
    assert {"stale", "too_few_real_items"} < outcomes and outcomes & {"bronze", "silver", "gold"}, outcomes


async def test_an_evidence_time_v3_refuses_leaves_out_that_agent_only() -> None:
    """Intake refuses times before 1970; a log written before it did may hold one. trustscore-v3 cannot
    rate that agent (its anchored decay refuses times 960 half-lives from the anchor), and the other
    agents' ratings must go on, on the projector's path and the time refresh's."""
    ratings = service(models=SERVABLE_MODELS)
    old = msgspec.structs.replace(item(BOB, 50.0, 99), at=dt.datetime(1900, 1, 1, tzinfo=dt.UTC))
    ratings._agents[BOB].evidence.append((ratings.size, old))
    ratings.size += 1
    ratings.recompute()
    assert ratings.stored(BOB, "trustscore-v3") is None
    assert ratings.stored(BOB, "trustscore-v2") is not None
    assert ratings.stored(ALICE, "trustscore-v3") is not None
    ratings._ratings["trustscore-v3"].clear()
    await ratings.recompute_all()
    assert ratings.stored(BOB, "trustscore-v3") is None
    assert ratings.stored(ALICE, "trustscore-v3") is not None


def before_1970(agent: str, n: int) -> EvidenceItem:
    """A row trustscore-v3 refuses (intake refuses it since 2026-12-01; an older log may hold one)."""
    return msgspec.structs.replace(item(agent, 50.0, n), at=dt.datetime(1900, 1, 1, tzinfo=dt.UTC))


async def test_an_agent_v3_comes_to_refuse_loses_its_v3_rating_and_stops_no_refresh() -> None:
    """Projecting an old log in steps: Bob is rated under v3, then his pre-1970 row arrives. A full
    recompute leaves him out; neither path may keep his earlier v3 rating as if current, and when his
    kept rows fall out of their window (a row becoming due) the time refresh must not stop every model."""
    now = [AT]
    ratings = service(clock=lambda: now[0], models=SERVABLE_MODELS)
    due = msgspec.structs.replace(item(BOB, 50.0, 98), at=AT + dt.timedelta(days=1))
    ratings._agents[BOB].evidence.append((ratings.size, due))
    ratings.size += 1
    ratings.recompute()
    await ratings.recompute_all()
    assert ratings.stored(BOB, "trustscore-v3") is not None
    ratings._agents[BOB].evidence.append((ratings.size, before_1970(BOB, 99)))
    ratings.size += 1
    ratings.recompute([BOB])  # as refresh() does for the agents a projector step touched
    assert ratings.stored(BOB, "trustscore-v3") is None
    await ratings.recompute_all()
    assert ratings.stored(BOB, "trustscore-v3") is None
    now[0] = AT + dt.timedelta(days=2)  # Bob's row dated AT + 1 day is due
    await ratings.recompute_all()
    assert ratings.stored(BOB, "trustscore-v3") is None
    full = service(clock=lambda: now[0], models=SERVABLE_MODELS)
    full._agents, full.size = ratings._agents, ratings.size
    full.recompute()
    for model in ratings.models:
        for agent in (ALICE, BOB):
            got, want = ratings.stored(agent, model), full.stored(agent, model)
            assert (got and (got.rating, got.medals, got.at)) == (
                want and (want.rating, want.medals, want.at)
            )


async def test_one_refused_agent_does_not_make_the_recompute_quadratic(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After v3 refused the batch, rating the agents apart must not read every agent's rows once per
    agent (O(agents x items): hours on the event loop at 10^5 agents, on a worker's first refresh)."""
    ratings = service(models=SERVABLE_MODELS)
    for n in range(20):
        agent = f"ts1_{n:040x}"
        data = ratings._agents[agent] = _AgentData()
        for k in range(10):
            data.evidence.append((ratings.size, item(agent, 70.0, k)))
            ratings.size += 1
    ratings._agents[BOB].evidence.append((ratings.size, before_1970(BOB, 99)))
    ratings.size += 1
    rows = sum(len(d.evidence) for d in ratings._agents.values())
    scored: list[int] = []
    real = score_agents

    def counting(evidence: Any, *args: Any, **kwargs: Any) -> Any:
        scored.append(len(evidence))
        return real(evidence, *args, **kwargs)

    monkeypatch.setattr("trustscore.services.ratings.score_agents", counting)
    ratings.recompute()
    assert ratings.stored(ALICE, "trustscore-v3") is not None
    assert ratings.stored(BOB, "trustscore-v3") is None
    # Per model one pass over every row; v3's halving about three more in all (each level re-reads only
    # the half that failed). One agent at a time over every row was 25 passes here.
    assert sum(scored) <= (len(ratings.models) + 3) * rows, (sum(scored), rows)


class ManyAgents:
    """Projected evidence of ``agents`` agents, 3 items each (a log a process takes the lease over)."""

    def __init__(self, agents: int) -> None:
        self.rows = [
            EvidenceRow(3 * a + n, 0, item(f"ts1_{a:040x}", 50.0 + a % 40, n))
            for a in range(agents)
            for n in range(3)
        ]

    async def projected_size(self) -> int:
        return len(self.rows)

    async def evidence_since(self, start: int, end: int) -> list[EvidenceRow]:
        return self.rows[start:end]

    async def snapshots_since(self, start: int, end: int) -> list[Any]:
        return []


def scoring_threads(ratings: RatingService) -> list[threading.Thread]:
    """The threads ``ratings`` scores in from now on, one entry per scoring."""
    threads: list[threading.Thread] = []
    score = ratings._score

    def recording(*args: Any) -> Any:
        threads.append(threading.current_thread())
        return score(*args)

    ratings._score = recording  # type: ignore[method-assign,assignment]
    return threads


async def test_a_refresh_of_many_agents_is_scored_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """A worker that takes the ratings lease over recomputes every agent: on a large log, seconds of
    CPU that would stall its health checks (and, in an ``all`` process, every request). Its rows are
    grouped by agent in a worker thread too (from OFF_LOOP_ROWS rows), in log order."""
    monkeypatch.setattr(ratings_module, "OFF_LOOP_ROWS", 100)
    ratings = RatingService(ManyAgents(OFF_LOOP_AGENTS), load_models(), Metrics(), clock=lambda: AT)  # type: ignore[arg-type]
    threads = scoring_threads(ratings)
    assert len(await ratings.refresh(publish=False)) == OFF_LOOP_AGENTS
    assert threads and threading.main_thread() not in threads
    rows = ManyAgents(OFF_LOOP_AGENTS).rows
    for agent in (f"ts1_{0:040x}", f"ts1_{OFF_LOOP_AGENTS - 1:040x}"):
        assert ratings._agents[agent].evidence == [(r.index, r.item) for r in rows if r.item.agent == agent]
    small = RatingService(ManyAgents(3), load_models(), Metrics(), clock=lambda: AT)  # type: ignore[arg-type]
    on_loop = RatingService(ManyAgents(OFF_LOOP_AGENTS), load_models(), Metrics(), clock=lambda: AT)  # type: ignore[arg-type]
    await on_loop.refresh(publish=False)
    on_loop.recompute()  # every agent again, on the loop: the reference
    assert await small.refresh(publish=False)  # few agents: scored on the loop, as before
    for model in ratings.models:
        for agent in (f"ts1_{0:040x}", f"ts1_{OFF_LOOP_AGENTS - 1:040x}"):
            assert ratings.stored(agent, model).rating == on_loop.stored(agent, model).rating  # type: ignore[union-attr]


class Table:
    """A rating table that records what each write claims: the log size every rating holds for."""

    def __init__(self) -> None:
        self.writes: list[tuple[int, int]] = []  # (rows, claimed log size)

    async def write(self, rows: list[Any], log_size: int) -> None:
        self.writes.append((len(rows), log_size))


async def test_while_many_agents_are_scored_off_the_loop_readers_see_the_ratings_of_before() -> None:
    """The review's interleavings: while a refresh's scoring runs in its thread, the served ratings,
    the log size they name (snapshots sign it, attestations too) and what a full recompute publishes
    must all still be those of before; everything moves together once the scores are in."""
    store = ManyAgents(OFF_LOOP_AGENTS)
    first = len(store.rows)
    now = [AT]
    table = Table()
    ratings = RatingService(store, load_models(), Metrics(), clock=lambda: now[0], table=table)  # type: ignore[arg-type]
    await ratings.refresh()
    old_agent = f"ts1_{3:040x}"
    before = {m: ratings.stored(old_agent, m) for m in ratings.models}
    # More evidence arrives: each agent gets another item, and new agents appear.
    more = ManyAgents(2 * OFF_LOOP_AGENTS).rows
    for row in more:
        store.rows.append(EvidenceRow(len(store.rows), 0, msgspec.structs.replace(row.item, value=99.0)))
    entered, release = threading.Event(), threading.Event()
    score = ratings._score

    def slow(*args: Any) -> Any:
        entered.set()
        assert release.wait(10)
        return score(*args)

    ratings._score = slow  # type: ignore[method-assign,assignment]
    refresh = asyncio.create_task(ratings.refresh())
    while not entered.is_set():
        await asyncio.sleep(0.001)
    assert ratings.size == first  # not the size of evidence whose ratings are not in yet
    assert all(ratings.stored(old_agent, m) == before[m] for m in ratings.models)
    assert ratings.stored(f"ts1_{2 * OFF_LOOP_AGENTS - 1:040x}") is None
    now[0] = AT + dt.timedelta(hours=1)
    ratings._score = score  # type: ignore[method-assign]
    await ratings.recompute_all()  # reads the evidence of before only, and says so
    assert table.writes[-1][1] == first
    assert all(r.log_size == first for m in ratings.models if (r := ratings.stored(old_agent, m)))
    # The agents being scored keep their ratings: moved to AT + 1 h here, they would move back to AT
    # when the refresh's ratings (of newer evidence, scored at AT) come in.
    assert all(ratings.stored(old_agent, m) == before[m] for m in ratings.models)
    release.set()
    await refresh
    assert ratings.size == len(store.rows) and table.writes[-1][1] == len(store.rows)
    for model in ratings.models:
        held = ratings.stored(old_agent, model)
        assert held is not None and held.log_size == len(store.rows) and held.at == AT  # the new evidence
    assert ratings.stored(f"ts1_{2 * OFF_LOOP_AGENTS - 1:040x}") is not None
    await ratings.recompute_all()  # and a full recompute after it agrees, and moves it on in time
    assert all(ratings.stored(old_agent, m).log_size == len(store.rows) for m in ratings.models)  # type: ignore[union-attr]
    assert all(ratings.stored(old_agent, m).at == now[0] for m in ratings.models)  # type: ignore[union-attr]


def waiting_on(fn: Callable[..., T]) -> tuple[Callable[..., T], threading.Event, threading.Event]:
    """``fn`` made to wait, once called, until released: (the waiting function, entered, release)."""
    entered, release = threading.Event(), threading.Event()

    def waiting(*args: Any) -> T:
        entered.set()
        assert release.wait(10)
        return fn(*args)

    return waiting, entered, release


async def test_a_time_refresh_at_an_earlier_time_than_a_refresh_off_the_loop_applies() -> None:
    """The other order: the time refresh starts scoring at AT + 1 h, a refresh of new evidence starts
    scoring in its thread at AT + 2 h, and the time refresh finishes first. Nothing moves back (1 h, then
    2 h), so the time refresh applies to the agents being refreshed too (they are not left behind)."""
    store = ManyAgents(OFF_LOOP_AGENTS)
    now = [AT]
    ratings = RatingService(store, load_models(), Metrics(), clock=lambda: now[0])  # type: ignore[arg-type]
    await ratings.refresh()
    agent = f"ts1_{5:040x}"
    before = {m: ratings.stored(agent, m) for m in ratings.models}
    for row in ManyAgents(OFF_LOOP_AGENTS).rows:
        store.rows.append(EvidenceRow(len(store.rows), 0, msgspec.structs.replace(row.item, value=10.0)))
    slow_states, time_entered, time_release = waiting_on(ratings._refresh_states)
    slow_score, refresh_entered, refresh_release = waiting_on(ratings._score)
    ratings._refresh_states = slow_states  # type: ignore[method-assign]
    ratings._score = slow_score  # type: ignore[method-assign]
    now[0] = AT + dt.timedelta(hours=1)
    timed = asyncio.create_task(ratings.recompute_all())
    while not time_entered.is_set():
        await asyncio.sleep(0.001)
    now[0] = AT + dt.timedelta(hours=2)
    refresh = asyncio.create_task(ratings.refresh())
    while not refresh_entered.is_set():
        await asyncio.sleep(0.001)
    time_release.set()
    await timed
    for model in ratings.models:
        held = ratings.stored(agent, model)
        assert held is not None and before[model] is not None
        assert held.at == AT + dt.timedelta(hours=1) and held.log_size == before[model].log_size  # type: ignore[union-attr]
    refresh_release.set()
    await refresh
    for model in ratings.models:
        held = ratings.stored(agent, model)
        assert held is not None and held.at == AT + dt.timedelta(hours=2) and held.log_size == len(store.rows)


async def test_a_refresh_off_the_loop_that_fails_applies_nothing() -> None:
    store = ManyAgents(OFF_LOOP_AGENTS)
    ratings = RatingService(store, load_models(), Metrics(), clock=lambda: AT)  # type: ignore[arg-type]
    score = ratings._score

    def failing(*args: Any) -> Any:
        raise RuntimeError("scoring failed")

    ratings._score = failing  # type: ignore[method-assign,assignment]
    with pytest.raises(RuntimeError):
        await ratings.refresh()
    assert ratings.size == 0 and ratings._agents == {}
    ratings._score = score  # type: ignore[method-assign]
    assert len(await ratings.refresh()) == OFF_LOOP_AGENTS  # the next refresh does it all
    assert all(len(data.evidence) == 3 for data in ratings._agents.values())


async def test_a_refresh_of_few_agents_with_many_items_is_scored_off_the_loop() -> None:
    """Scoring costs time per item, not per agent: a takeover of a few agents with long histories."""
    store = ManyAgents(4)
    for n in range(3, OFF_LOOP_ITEMS // 4 + 3):
        for a in range(4):
            store.rows.append(EvidenceRow(len(store.rows), 0, item(f"ts1_{a:040x}", 60.0, n)))
    ratings = RatingService(store, load_models(), Metrics(), clock=lambda: AT)  # type: ignore[arg-type]
    threads = scoring_threads(ratings)
    assert len(await ratings.refresh(publish=False)) == 4
    assert threads and threading.main_thread() not in threads


async def test_the_data_a_refresh_off_the_loop_replaced_is_freed_off_the_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Freeing an agent's old lists releases every item they hold: for every agent at once (the hourly
    snapshot refresh touches them all), a pass over the whole log. So are the ratings replaced."""
    store = ManyAgents(OFF_LOOP_AGENTS)
    ratings = RatingService(store, load_models(), Metrics(), clock=lambda: AT)  # type: ignore[arg-type]
    await ratings.refresh(publish=False)
    old = {name: data for name, data in ratings._agents.items()}
    freed: list[tuple[threading.Thread, int]] = []
    release = ratings_module._release

    def recording(retired: list[Any]) -> None:
        freed.append((threading.current_thread(), len(retired)))
        release(retired)
        assert retired == []

    monkeypatch.setattr(ratings_module, "_release", recording)
    for row in ManyAgents(OFF_LOOP_AGENTS).rows:  # one more item for each agent
        store.rows.append(EvidenceRow(len(store.rows), 0, row.item))
    await ratings.refresh(publish=False)
    # Each agent's data and its rating under each model, freed in one worker thread.
    retired = OFF_LOOP_AGENTS * (1 + len(ratings.models))
    assert freed == [(freed[0][0], retired)] and freed[0][0] is not threading.main_thread()
    assert all(ratings._agents[name] is not data for name, data in old.items())
    assert all(len(data.evidence) == 3 for data in old.values())  # replaced, never changed in place


class KeptTable:
    """A rating table that keeps what it is given (the real one: tests/integration/store)."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], Any] = {}

    async def write(self, rows: Any, log_size: int) -> int:
        self.rows.update(((r.model, r.agent), r) for r in rows)
        return 0


def per_agent_work_threads(monkeypatch: pytest.MonkeyPatch) -> list[threading.Thread]:
    """The threads in which kept ratings are built and published rows encoded, from now on."""
    threads: list[threading.Thread] = []
    rated, encode = ratings_module.RatedAgent, ratings_module._Encoder.__call__

    def recording_rated(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread())
        return rated(*args, **kwargs)

    def recording_encode(self: Any, obj: Any) -> bytes:
        threads.append(threading.current_thread())
        return encode(self, obj)

    monkeypatch.setattr(ratings_module, "RatedAgent", recording_rated)
    monkeypatch.setattr(ratings_module._Encoder, "__call__", recording_encode)
    return threads


def with_table(table: Any, now: list[dt.datetime]) -> RatingService:
    """A service over OFF_LOOP_AGENTS agents' evidence, publishing into ``table``, its clock at ``now[0]``."""
    return RatingService(
        ManyAgents(OFF_LOOP_AGENTS),  # type: ignore[arg-type]
        load_models(),
        Metrics(),
        clock=lambda: now[0],
        table=table,
    )


def releases(monkeypatch: pytest.MonkeyPatch) -> list[tuple[threading.Thread, int]]:
    """Each ``_release`` from now on: its thread and how many objects it freed."""
    freed: list[tuple[threading.Thread, int]] = []
    release = ratings_module._release

    def recording(retired: list[Any]) -> None:
        freed.append((threading.current_thread(), len(retired)))
        release(retired)

    monkeypatch.setattr(ratings_module, "_release", recording)
    return freed


@pytest.mark.parametrize("publish", [True, False])
async def test_many_ratings_are_kept_and_encoded_off_the_event_loop(
    publish: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A time refresh (hourly) and a refresh of many agents build one kept rating and one encoded row per
    agent and model: at 10^5 agents and three models, seconds that stalled the event loop (2026-12-04:
    1.8-2.1 s per hourly refresh, /tmp stall script in the commit). Only putting them in place may run on
    the loop; what is kept and published is the same as before."""
    now = [AT]
    table = KeptTable()
    ratings = with_table(table, now)
    threads = per_agent_work_threads(monkeypatch)
    await ratings.refresh(publish=publish)
    freed = releases(monkeypatch)
    now[0] = AT + dt.timedelta(hours=1)
    await ratings.recompute_all()
    assert len(threads) >= 2 * OFF_LOOP_AGENTS * len(ratings.models)
    assert threading.main_thread() not in threads
    # The ratings the time refresh replaced, and the rows it wrote, are freed off the loop too.
    assert [n for _, n in freed] == [2 * OFF_LOOP_AGENTS * len(ratings.models)]
    assert freed[0][0] is not threading.main_thread()
    monkeypatch.undo()
    reference = RatingService(None, load_models(), Metrics(), clock=lambda: now[0])  # type: ignore[arg-type]
    reference._agents, reference.size = ratings._agents, ratings.size
    reference.recompute()
    encode = msgspec.json.encode
    assert len(table.rows) == OFF_LOOP_AGENTS * len(ratings.models)
    for (model, agent), row in table.rows.items():
        want = reference.stored(agent, model)
        got = ratings.stored(agent, model)
        assert want is not None and got is not None
        assert (got.rating, got.medals, got.at, got.log_size) == (
            want.rating,
            want.medals,
            now[0],
            ratings.size,
        )
        assert (row.rating, row.computed_at, row.log_size) == (encode(want.rating), now[0], ratings.size)
        assert row.medals == (None if want.medals is None else encode(want.medals))


class DownTable:
    """A rating table whose writes fail while ``down`` (the database went away)."""

    down = False

    async def write(self, rows: Any, log_size: int) -> int:
        if self.down:
            raise ConnectionError("database went away")
        return 0


async def test_what_a_refresh_replaced_is_freed_off_the_loop_when_its_write_fails(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With the database down every hourly refresh fails its write; what it replaced must still be freed
    in a worker thread (review of 2026-12-04: it was freed on the loop, with the exception's frame), and
    its rows stay staged for the next write."""
    now = [AT]
    table = DownTable()
    ratings = with_table(table, now)
    await ratings.refresh()
    freed = releases(monkeypatch)
    table.down = True
    now[0] = AT + dt.timedelta(hours=1)
    with pytest.raises(ConnectionError):
        await ratings.recompute_all()
    assert [n for _, n in freed] == [2 * OFF_LOOP_AGENTS * len(ratings.models)]
    assert freed[0][0] is not threading.main_thread()
    assert len(ratings._unpublished) == OFF_LOOP_AGENTS * len(ratings.models)  # kept for the next write
    assert {row.computed_at for row in ratings._unpublished.values()} == {now[0]}
    table.down = False
    await ratings.refresh()  # nothing new projected: writes what is staged
    assert ratings._unpublished == {}
