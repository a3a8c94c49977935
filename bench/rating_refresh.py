"""The service's periodic rating refresh (decay): kept states against a full recompute, in one run.

``RatingService.recompute_all`` moves every agent's rating to a new time. Until 2026-12-01 it was a full
recompute of every served model and its medals (``RatingService._score`` over all agents, O(items)); it
now refreshes one :class:`~trustscore.scoring.refresh.RatingState` per model with medal counts kept
(``RatingService._refresh_states``). This bench fills a service with synthetic evidence (the shape of
``bench/scoring.py``'s columns, as the projector would hold it) and prints, for the served models and
for the previous served set (without trustscore-v3):

* the full recompute at a new time (what the refresh cost before), the baseline of the run;
* the kept-state refresh: the first (every agent's rows read once), then one hour later with no new
  evidence, then one hour later after 1 % of the agents received one new item;

and checks that every refresh gave the full recompute's ratings and medals. After each refresh that
follows the first it prints the CPU time per agent and model of each stage of that refresh: the
engine's numbers, ``to_ratings``, ``award_columns``, ``_prepare`` (the kept ratings and the encoded
rows: in the refresh's worker thread), ``_apply`` (putting them in place, on the event loop) and
``_write`` (into a table that stores nothing).

    PYTHONPATH=src python bench/rating_refresh.py [--agents 10000] [--items 100] [--future]
"""

from __future__ import annotations

from _numpy_first import NUMPY_CPU  # before numpy: as the trustscore command sets it

# isort: split
import argparse
import asyncio
import datetime as dt
import functools
import sys
import time
from typing import Any

import numpy as np

from _common import NoRatingTable, numpy_setting, print_header  # run as a script: bench/ is on sys.path
from trustscore.kinds.graded import DIMENSIONS
from trustscore.scoring.inputs import EvidenceItem
from trustscore.scoring.medals import award_columns
from trustscore.scoring.ratings import to_ratings
from trustscore.scoring.times import to_micros
from trustscore.services.metrics import Metrics
from trustscore.services.ratings import (
    RELEASED_MODELS,
    RatingService,
    Scored,
    _AgentData,
    _counts,
    _model_rows,
    load_models,
)
from trustscore.settings import SERVABLE_MODELS

AT = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)
SOURCES = ("real", "verified", "benchmark", "arena", "self-reported", "simulation")


def fill(service: RatingService, agents: int, items: int, future: bool, seed: int = 7) -> None:
    """``items`` evidence items per agent: 40 keys per agent answered again, a third superseded."""
    rng = np.random.default_rng(seed)
    index = 0
    # Ages in seconds, none in the future: intake refuses times beyond the server's clock plus 5 minutes,
    # so a row becomes due at most minutes after it arrives (with --future, 2 % up to 3 days ahead).
    ages = rng.integers(-3 * 86_400 if future else 0, 180 * 86_400, agents * items).tolist()
    values = np.round(rng.uniform(0.0, 1.0, agents * items), 3).tolist()
    for a in range(agents):
        name = f"ts1_{a:040x}"
        data = service._agents[name] = _AgentData()
        for i in range(items):
            dimension = DIMENSIONS[(a + i) % len(DIMENSIONS)]
            data.evidence.append(
                (
                    index,
                    EvidenceItem(
                        agent=name,
                        dimension=dimension,
                        source=SOURCES[(a * 7 + i) % len(SOURCES)],
                        at=AT - dt.timedelta(seconds=ages[index]),
                        value=values[index],
                        key=f"{dimension}@1/q{i % 40}",
                        issuer=f"ts1_{(a * 31 + i) % 2000:040x}",
                    ),
                )
            )
            index += 1
    service.size = index


def timed(run: Any) -> tuple[float, Any]:
    started = time.perf_counter()
    out = run()
    return time.perf_counter() - started, out


def per_agent_costs(service: RatingService, at: dt.datetime) -> str:
    """CPU per agent and model of each stage of a refresh at ``at`` (just refreshed to it: no agent is
    out of its window): the engine's numbers, the structs (``to_ratings``, ``award_columns``), keeping
    them (``_prepare``, ``_apply``) and writing them (into a table that stores nothing)."""
    micros = to_micros(at)
    names = sorted(service._agents)
    read = functools.partial(service._prefixes_of, _counts(service._inputs(names)))
    spent = dict.fromkeys(("engine", "to_ratings", "medals"), 0.0)
    scored: Scored = {}
    for model, state in service._states.items():
        weights, rules = service.models[model], service.medals.get(model)
        started = time.process_time()
        columns = state.refresh(micros, functools.partial(_model_rows, read, model))
        built = time.process_time()
        ratings = to_ratings(columns, weights)
        rated = time.process_time()
        medals = (
            award_columns(ratings, *state.medal_counts(), rules, micros) if rules else [None] * len(ratings)
        )
        spent["engine"] += built - started
        spent["to_ratings"] += rated - built
        spent["medals"] += time.process_time() - rated
        scored[model] = list(zip(ratings, medals, strict=True))
    service.table = NoRatingTable()  # type: ignore[assignment]
    started = time.process_time()
    prepared = service._prepare(scored, at, service.size)
    made = time.process_time()
    replaced = service._apply(prepared, names)  # freed off the loop in the service: not timed here
    applied = time.process_time()
    service._stage_rows(prepared.rows)
    asyncio.run(service._write())
    service.table = None
    spent["_prepare"], spent["_apply"] = made - started, applied - made
    spent["_write"] = time.process_time() - applied
    del replaced
    per = 1e6 / len(names) / len(service._states)
    return "   ".join(f"{k} {v * per:.2f}" for k, v in spent.items()) + " µs CPU per agent and model"


def same(a: Scored, b: Scored) -> bool:
    return a.keys() == b.keys() and all(
        [(r.agent, r, m) for r, m in a[k]] == [(r.agent, r, m) for r, m in b[k]] for k in a
    )


def bench(models: tuple[str, ...], agents: int, items: int, future: bool) -> bool:
    service = RatingService(None, load_models(names=models), Metrics())  # type: ignore[arg-type]
    fill(service, agents, items, future)
    names = sorted(service._agents)
    ok = True

    def step(label: str, at: dt.datetime, full_seconds: float | None = None, costs: bool = True) -> float:
        nonlocal ok
        inputs = service._inputs(names)
        full_s, full = timed(lambda: service._score(inputs, at))
        kept_s, kept = timed(lambda: service._refresh_states(inputs, at))
        ok &= same(kept, full)
        print(
            f"  {label:<38} full recompute {full_s:7.3f} s   kept states {kept_s:7.3f} s"
            f"   ratio {kept_s / full_s:5.3f}   {'identical' if same(kept, full) else 'DIFFERENT'}"
        )
        if costs:
            print(f"    {per_agent_costs(service, at)}")
        return full_s

    print(f"models {', '.join(models)}: {agents:,} agents x {items} items = {agents * items:,} rows")
    print(numpy_setting(NUMPY_CPU))
    step("first refresh (every row read once)", AT, costs=False)
    step("1 h later, no new evidence", AT + dt.timedelta(hours=1))
    rng = np.random.default_rng(11)
    for a in rng.choice(agents, max(1, agents // 100), replace=False).tolist():
        name = f"ts1_{a:040x}"
        old = service._agents[name].evidence[-1][1]
        service._agents[name].evidence.append((service.size, old))
        service.size += 1
    step("2 h later, 1 % of agents +1 item", AT + dt.timedelta(hours=2))
    step("3 h later, no new evidence", AT + dt.timedelta(hours=3))
    return ok


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--agents", type=int, default=10_000)
    parser.add_argument("--items", type=int, default=100)
    parser.add_argument("--future", action="store_true", help="2 %% of rows up to 3 days ahead (due later)")
    args = parser.parse_args()
    print_header("rating refresh: kept states against a full recompute")
    ok = bench(SERVABLE_MODELS, args.agents, args.items, args.future)  # trustscore-v3 served
    ok &= bench(RELEASED_MODELS, args.agents, args.items, args.future)  # the default served set
    if not ok:
        print("a kept-state refresh differed from the full recompute", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
