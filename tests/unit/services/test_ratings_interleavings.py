"""Random interleavings of refreshes (scored on the loop and in a worker thread, some failing in the
thread, some cancelled, some not publishing) and time refreshes (two loops at once), over evidence and
snapshots touching a few or every agent, with a rating table that fails some writes. After every turn of
the event loop: no (model, agent) rating moves back in time, in memory or in the table; no agent with
evidence loses its rating; every held rating covers the agent's evidence below the size the service
names; the table never claims a log size its rows do not reflect. Written by a reviewer of the fix that
keeps a rating's time from moving back (a time refresh finishing while a refresh scores in its thread):
on the code before it, 38 of 40 seeds failed."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import random
import threading
import time
from typing import Any

import msgspec
import pytest

from tests.unit.services.test_ratings_recompute import AT, item
from trustscore.scoring.inputs import Snapshot
from trustscore.services import ratings as rm
from trustscore.services.metrics import Metrics
from trustscore.services.ratings import RatingService, load_models
from trustscore.store.projection_tables import EvidenceRow

AGENTS = [f"ts1_{a:040x}" for a in range(12)]


class Store:
    def __init__(self) -> None:
        self.entries: list[tuple[str, Any]] = []  # ("e", EvidenceItem) | ("s", [Snapshot])
        self.size = 0

    def add_evidence(self, agent: str, rng: random.Random) -> None:
        self.entries.append(("e", item(agent, rng.uniform(0, 100), len(self.entries))))

    def add_snapshot(self, models: list[str]) -> None:
        self.entries.append(
            ("s", [Snapshot(agent=a, at=AT, total=50, model_version=m) for a in AGENTS for m in models])
        )

    def touches(self, agent: str, lo: int, hi: int) -> bool:
        for kind, x in self.entries[lo:hi]:
            if kind == "e" and x.agent == agent:
                return True
            if kind == "s" and any(s.agent == agent for s in x):
                return True
        return False

    async def projected_size(self) -> int:
        await asyncio.sleep(0)
        return self.size

    async def evidence_since(self, start: int, end: int) -> list[EvidenceRow]:
        await asyncio.sleep(0)
        return [
            EvidenceRow(i, 0, x) for i, (k, x) in enumerate(self.entries[:end]) if i >= start and k == "e"
        ]

    async def snapshots_since(self, start: int, end: int) -> list[Any]:
        await asyncio.sleep(0)
        return [
            (i, s, None) for i, (k, x) in enumerate(self.entries[:end]) if i >= start and k == "s" for s in x
        ]


class Table:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.rows: dict[tuple[str, str], Any] = {}
        self.log_size = 0
        self.errors: list[str] = []
        self.fail = 0.0
        self.rng = random.Random(1)

    async def write(self, rows: list[Any], log_size: int) -> None:
        await asyncio.sleep(self.rng.random() * 0.003)
        if self.rng.random() < self.fail:
            raise ConnectionError("write failed")
        self.log_size = max(self.log_size, log_size)
        for r in rows:
            old = self.rows.get((r.model, r.agent))
            if old is None or (r.log_size, r.computed_at) >= (old.log_size, old.computed_at):
                if old is not None and r.computed_at < old.computed_at:
                    self.errors.append(
                        f"table at back {r.agent[-3:]} {r.model} {old.computed_at}->{r.computed_at}"
                    )
                self.rows[(r.model, r.agent)] = r
        self.check()

    def check(self) -> None:
        for (m, a), r in self.rows.items():
            if self.store.touches(a, r.log_size, self.log_size):
                self.errors.append(f"table claims {self.log_size} but row {a[-3:]} {m} is of {r.log_size}")


@pytest.mark.parametrize("seed", range(12))
async def test_random_interleavings_keep_the_ratings_invariants(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rm, "OFF_LOOP_AGENTS", 6)
    rng = random.Random(seed)
    store = Store()
    table = Table(store)
    t0 = time.monotonic()
    models = load_models()
    ratings = RatingService(
        store,  # type: ignore[arg-type]
        models,
        Metrics(),
        clock=lambda: AT + dt.timedelta(seconds=(time.monotonic() - t0) * 1000),
        table=table,  # type: ignore[arg-type]
    )
    errors: list[str] = table.errors
    last_at: dict[tuple[str, str], dt.datetime] = {}
    apply = ratings._apply

    def checked_apply(prepared: Any, names: Any) -> Any:
        replaced = apply(prepared, names)
        for m, rated in prepared.rated.items():
            for agent, r in rated.items():
                k = (m, agent)
                if k in last_at and r.at < last_at[k]:
                    errors.append(f"memory at back {agent[-3:]} {m} {last_at[k]} -> {r.at}")
                last_at[k] = r.at
        return replaced

    ratings._apply = checked_apply  # type: ignore[method-assign]
    score, states = ratings._score, ratings._refresh_states

    def slow_score(*args: Any) -> Any:
        if threading.current_thread() is not threading.main_thread():
            time.sleep(rng.random() * 0.01)
            if rng.random() < 0.1:
                raise RuntimeError("scoring failed")
        return score(*args)

    def slow_states(*args: Any) -> Any:
        time.sleep(rng.random() * 0.01)
        return states(*args)

    ratings._score = slow_score  # type: ignore[method-assign,assignment]
    ratings._refresh_states = slow_states  # type: ignore[method-assign,assignment]
    stop = asyncio.Event()

    def memory_check() -> None:
        for m in models:
            for a in AGENTS:
                r = ratings._ratings[m].get(a)
                if a in ratings._agents and ratings._agents[a].evidence and r is None:
                    errors.append(f"lost {a[-3:]} {m}")
                if r is not None and store.touches(a, r.log_size, ratings.size):
                    errors.append(f"memory stale {a[-3:]} {m} {r.log_size} < {ratings.size}")

    async def monitor() -> None:
        while not stop.is_set():
            memory_check()
            await asyncio.sleep(0.0005)

    async def projector() -> None:
        for _ in range(25):
            r = rng.random()
            if r < 0.3:
                store.add_snapshot(list(models))
            elif r < 0.6:
                for a in AGENTS:
                    store.add_evidence(a, rng)
            else:
                for a in rng.sample(AGENTS, rng.randint(1, 3)):
                    store.add_evidence(a, rng)
            store.size = len(store.entries)
            t = asyncio.create_task(ratings.refresh(publish=rng.random() < 0.8))
            if rng.random() < 0.1:
                await asyncio.sleep(rng.random() * 0.005)
                t.cancel()
            with contextlib.suppress(RuntimeError, ConnectionError, asyncio.CancelledError):
                await t
            await asyncio.sleep(rng.random() * 0.005)

    async def timer() -> None:
        while not stop.is_set():
            with contextlib.suppress(ConnectionError):
                await ratings.recompute_all()
            await asyncio.sleep(rng.random() * 0.004)

    table.fail = 0.1
    mon = asyncio.create_task(monitor())
    timers = [asyncio.create_task(timer()) for _ in range(2)]
    await projector()
    # Settle: one refresh that succeeds, then two time refreshes.
    ratings._score = score  # type: ignore[method-assign]
    table.fail = 0.0
    await ratings.refresh()
    stop.set()
    await asyncio.gather(*timers, mon)
    await ratings.recompute_all()
    await ratings.recompute_all()
    memory_check()
    now = ratings.clock()
    for m in models:
        for a in AGENTS:
            r = ratings._ratings[m].get(a)
            if r is not None and (now - r.at) > dt.timedelta(hours=1000):
                errors.append(f"stale at {a[-3:]} {m}")
    for (m, a), r in table.rows.items():
        mem = ratings._ratings[m].get(a)
        if mem is None or (mem.at, mem.rating) != (
            r.computed_at,
            msgspec.json.decode(r.rating, type=type(mem.rating)),
        ):
            errors.append(f"table differs from memory {a[-3:]} {m}")
    assert not errors, errors[:10]
