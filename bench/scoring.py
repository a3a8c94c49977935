"""Bench the scoring engine: a full recompute of 1,000,000 evidence rows across 10,000 agents.

Runs each released model over the same synthetic columns, the medals of trustscore-v2 after its recompute
(their cost as a ratio to that recompute, measured in the same run), then the plain-Python baseline-v0.3
(:mod:`trustscore.scoring.reference`) on a sample of agents in the same run, checks that the engine's
ratings of the sample are identical to it, and prints both rates and their ratio.

Then trustscore-v3 beside trustscore-v2 (the same model, decay anchored in time): how many published
integers (total, adjusted, total interval, n) and published 10^-6 numbers differ, at several times.

Then the refresh to a new time (:class:`trustscore.scoring.refresh.RatingState`) of each of
``--refresh-models`` over ``--refresh-agents`` agents with each of ``--refresh-items`` items per agent: the
refresh one hour later beside the full recompute at that time, in the same run, checked identical bit for
bit. baseline-v0.3's and trustscore-v3's cost should not grow with the items per agent (trustscore-v1/v2
refresh by a full pass: docs/methodology.md).

Each model's full recompute is also timed in ``--threads`` threads (``score_columns(threads=)``, default 2)
alternately with one thread, and checked identical to it.

With ``--against REV`` each model's full recompute is also timed with the engine of git revision REV
(its ``src/trustscore/scoring`` loaded beside this one), alternating old and new in the same run: the
before/after ratio under the same load, and a check that both give the same ratings.

    PYTHONPATH=src python bench/scoring.py [--rows 1000000] [--agents 10000] [--sample 1000]
        [--refresh-agents 100000] [--refresh-items 1,10,30]
        [--refresh-models baseline-v0.3,trustscore-v2,trustscore-v3] [--against main]
"""

from __future__ import annotations

from _numpy_first import NUMPY_CPU  # before numpy: as the trustscore command sets it

# isort: split
import argparse
import atexit
import dataclasses
import hashlib
import importlib
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from _common import numpy_setting  # run as a script: bench/ is on sys.path
from trustscore.kinds.graded import DIMENSIONS
from trustscore.scoring import EvidenceBatch, SnapshotBatch, load_weights
from trustscore.scoring.engine import RatingColumns, score_columns
from trustscore.scoring.medals import find_medal_rules, medals_of
from trustscore.scoring.publish import published
from trustscore.scoring.ratings import Rating, to_ratings
from trustscore.scoring.reference import RefEvidence, RefSnapshot, score_baseline
from trustscore.scoring.refresh import RatingState
from trustscore.scoring.times import MICROS_PER_DAY, parse_time
from trustscore.scoring.weights import Weights

ROOT = Path(__file__).resolve().parents[1]
AT = parse_time("2026-11-30T00:00:00Z")
SOURCES = (
    "real",
    "real-benchmark",
    "arena",
    "verified",
    "benchmark",
    "real-confidential",
    "simulation",
    "synthetic",
    "self-reported",
    "tavern-event",
)


def synthetic(rows: int, agents: int, seed: int = 7) -> tuple[EvidenceBatch, SnapshotBatch]:
    """Columns shaped like the log: a third keyed (with re-submissions), half with an issuer, 2% future."""
    rng = np.random.default_rng(seed)
    agent = rng.integers(0, agents, rows)
    has_value = rng.random(rows) < 0.5
    value = np.where(has_value, np.round(rng.uniform(-0.1, 1.1, rows), 3), np.nan)
    result = np.where(has_value, -1, rng.integers(0, 3, rows)).astype(np.int8)
    keyed = rng.random(rows) < 0.35
    key = np.where(keyed, rng.integers(0, 40, rows), -1)  # ~40 exam questions per agent, answered again
    issuer = np.where(rng.random(rows) < 0.5, rng.integers(0, 2_000, rows), -1)
    at = AT - rng.integers(-3 * MICROS_PER_DAY, 180 * MICROS_PER_DAY, rows)
    evidence = EvidenceBatch(
        agents=tuple(f"agent-{i:05d}" for i in range(agents)),
        dimensions=DIMENSIONS,
        sources=SOURCES,
        issuers=tuple(f"issuer-{i:04d}" for i in range(2_000)),
        agent=agent,
        dimension=rng.integers(0, len(DIMENSIONS), rows),
        source=rng.integers(0, len(SOURCES), rows),
        issuer=issuer,
        key=key,
        value=value,
        result=result,
        at=at,
        extra_weight=np.ones(rows),
        seq=rng.permutation(rows).astype(np.int64),
    )
    per_agent = 5
    snap_agent = np.repeat(np.arange(agents), per_agent)
    n = snap_agent.size
    has_total = rng.random(n) < 0.9
    snapshots = SnapshotBatch(
        agents=evidence.agents,
        model_versions=("baseline-v0.2", "baseline-v0.3"),
        agent=snap_agent,
        at=AT - rng.integers(0, 90 * MICROS_PER_DAY, n),
        total=np.where(has_total, rng.integers(300, 800, n), 0),
        has_total=has_total,
        model_version=rng.integers(0, 2, n),
    )
    return evidence, snapshots


def recompute(
    evidence: EvidenceBatch, snapshots: SnapshotBatch, weights: Weights, threads: int = 1
) -> tuple[list[Rating], float]:
    start = time.perf_counter()
    ratings = to_ratings(score_columns(evidence, snapshots, weights, AT, threads=threads), weights)
    return ratings, time.perf_counter() - start


def engine_at(revision: str) -> Any:
    """The scoring package of git ``revision``, importable beside this one as ``scoring_<hash>``."""
    listed = subprocess.run(
        ["git", "-C", str(ROOT), "ls-tree", "--name-only", f"{revision}:src/trustscore/scoring"],
        capture_output=True,
        text=True,
    )
    if listed.returncode != 0:
        raise SystemExit(f"--against {revision}: no such revision in a git checkout at {ROOT}")
    tree = listed.stdout.split()
    name = "scoring_" + hashlib.sha256(revision.encode()).hexdigest()[:12]
    folder = Path(tempfile.mkdtemp(prefix="bench-scoring-"))
    atexit.register(shutil.rmtree, folder, True)
    (folder / name).mkdir()
    for file in (f for f in tree if f.endswith(".py")):
        text = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{revision}:src/trustscore/scoring/{file}"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        (folder / name / file).write_text(text.replace("trustscore.scoring", name))
    sys.path.insert(0, str(folder))
    return importlib.import_module(name)


def before_after(
    old: Any, evidence: EvidenceBatch, snapshots: SnapshotBatch, model: str, repeat: int, revision: str
) -> bool:
    """Old and new full recomputes alternately; prints both bests and their ratio; True if identical."""
    old_engine, old_ratings = (importlib.import_module(f"{old.__name__}.{m}") for m in ("engine", "ratings"))
    old_weights = old.load_weights(ROOT / "weights" / f"{model}.toml")
    weights = load_weights(ROOT / "weights" / f"{model}.toml")
    best = {"old": math.inf, "new": math.inf}
    same = True
    for _ in range(repeat):
        start = time.perf_counter()
        before = old_ratings.to_ratings(
            old_engine.score_columns(evidence, snapshots, old_weights, AT), old_weights
        )
        best["old"] = min(best["old"], time.perf_counter() - start)
        after, seconds = recompute(evidence, snapshots, weights)
        best["new"] = min(best["new"], seconds)
        same = same and msgspec.json.encode(before) == msgspec.json.encode(after)
    print(
        f"{model:>14}: before ({revision}) {best['old']:.3f} s, after {best['new']:.3f} s (best of {repeat}, "
        f"alternating); before / after = {best['old'] / best['new']:.2f}x; identical: {same}"
    )
    return same


def reference_sample(
    evidence: EvidenceBatch, snapshots: SnapshotBatch, weights: Weights, sample: list[int]
) -> tuple[dict[str, dict[str, object]], int, float]:
    """Plain-Python ratings of the sampled agents, the number of rows they read and the seconds taken."""
    rows = np.flatnonzero(np.isin(evidence.agent, sample))
    outcomes = ("failure", "partial", "success")
    items = [
        RefEvidence(
            agent=evidence.agents[evidence.agent[i]],
            dimension=evidence.dimensions[evidence.dimension[i]],
            source=evidence.sources[evidence.source[i]],
            value=None if np.isnan(evidence.value[i]) else float(evidence.value[i]),
            result=None if evidence.result[i] < 0 else outcomes[evidence.result[i]],
            key=None if evidence.key[i] < 0 else str(evidence.key[i]),
            at=int(evidence.at[i]),
            seq=int(evidence.seq[i]),
        )
        for i in rows.tolist()
    ]
    snaps = [
        RefSnapshot(
            agent=snapshots.agents[snapshots.agent[i]],
            at=int(snapshots.at[i]),
            total=int(snapshots.total[i]) if snapshots.has_total[i] else None,
            model_version=snapshots.model_versions[snapshots.model_version[i]],
        )
        for i in np.flatnonzero(np.isin(snapshots.agent, sample)).tolist()
    ]
    start = time.perf_counter()  # from rows to ratings, grouping by agent included
    by_agent: dict[str, list[RefEvidence]] = {}
    for item in items:
        by_agent.setdefault(item.agent, []).append(item)
    snaps_by_agent: dict[str, list[RefSnapshot]] = {}
    for snap in snaps:
        snaps_by_agent.setdefault(snap.agent, []).append(snap)
    out = {}
    for a in sample:
        name = evidence.agents[a]
        out[name] = score_baseline(name, by_agent.get(name, []), snaps_by_agent.get(name, []), weights, AT)
    return out, len(items), time.perf_counter() - start


class AgentRows:
    """The caller's store of rows by agent: the rows of a few agents without a pass over the others."""

    def __init__(self, evidence: EvidenceBatch, snapshots: SnapshotBatch) -> None:
        self.evidence, self.snapshots = evidence, snapshots
        self.asked = 0  # agents whose rows were asked for, in all
        self.code = {name: i for i, name in enumerate(evidence.agents)}
        self.by_agent = (
            np.argsort(evidence.agent, kind="stable"),
            np.argsort(snapshots.agent, kind="stable"),
        )
        self.starts = tuple(
            np.searchsorted(codes[order], np.arange(len(evidence.agents) + 1))
            for codes, order in ((evidence.agent, self.by_agent[0]), (snapshots.agent, self.by_agent[1]))
        )

    def __call__(self, names: tuple[str, ...]) -> tuple[EvidenceBatch, SnapshotBatch]:
        self.asked += len(names)
        if len(names) == len(self.evidence.agents):  # every agent: the whole log as it is
            return self.evidence, self.snapshots
        codes = [self.code[n] for n in names]
        ev_rows, snap_rows = (
            np.concatenate([order[start[c] : start[c + 1]] for c in codes] or [np.zeros(0, dtype=np.int64)])
            for order, start in zip(self.by_agent, self.starts, strict=True)
        )
        remap = np.full(len(self.evidence.agents), -1, dtype=np.int64)
        remap[codes] = np.arange(len(codes))
        evidence, snapshots = self.evidence.take(ev_rows), self.snapshots.take(snap_rows)
        return (  # the agents table cut to these agents (the bench's snapshots share it)
            dataclasses.replace(evidence, agents=names, agent=remap[evidence.agent]),
            dataclasses.replace(snapshots, agents=names, agent=remap[snapshots.agent]),
        )


def refresh_bench(model: str, agents: int, per_agent: int, repeat: int) -> bool:
    """Refresh a microsecond on (no row becomes due: baseline-v0.3's and trustscore-v3's O(agents) path;
    an unanchored decay model's pass over its kept rows) and one hour on (the agents with a row due are
    recomputed from their rows; an unanchored decay model reads all rows again) vs the full recompute at
    the same times; True if every refresh is identical to it bit for bit."""
    evidence, snapshots = synthetic(agents * per_agent, agents, seed=per_agent)
    weights = load_weights(ROOT / "weights" / f"{model}.toml")
    state = RatingState(weights)
    state.update(evidence, snapshots, AT)
    state.refresh(AT, AgentRows(evidence, snapshots))  # a decay model keeps its rows from here on
    rows_of = AgentRows(evidence, snapshots)
    hour = MICROS_PER_DAY // 24
    times: dict[str, list[float]] = {"micro": [], "hour": [], "full": []}
    recomputed = {"micro": 0, "hour": 0}
    steps = [("micro", AT + 1 + k) for k in range(repeat)] + [
        ("hour", AT + k * hour) for k in range(1, repeat + 1)
    ]
    for step, at in steps:  # each refresh moves on in time; the full recompute at the same time
        asked = rows_of.asked
        start = time.perf_counter()
        refreshed = state.refresh(at, rows_of)
        times[step].append(time.perf_counter() - start)
        recomputed[step] += rows_of.asked - asked
        start = time.perf_counter()
        full = score_columns(evidence, snapshots, weights, at)
        times["full"].append(time.perf_counter() - start)
        if not _same_columns(refreshed, full):
            return False
    micro, one_hour, full_best = (min(times[k]) for k in ("micro", "hour", "full"))
    print(
        f"refresh {model}, {agents:,} agents x {per_agent:,} items ({len(evidence):,} rows): "
        f"1 us on {micro:.4f} s ({recomputed['micro'] / repeat:,.0f} agents recomputed), "
        f"1 h on {one_hour:.4f} s ({recomputed['hour'] / repeat:,.0f} agents recomputed: a row became due); "
        f"full recompute {full_best:.3f} s (best of {repeat}); full / refresh = {full_best / micro:,.1f}x "
        f"and {full_best / one_hour:,.1f}x; identical: True"
    )
    return True


def v2_v3_differences(evidence: EvidenceBatch, snapshots: SnapshotBatch, days: tuple[int, ...]) -> None:
    """Published ratings of trustscore-v2 and trustscore-v3 (mathematically the same model) at AT + each
    of ``days``: the integers and the 10^-6 numbers that differ, and the largest difference of a float
    before publication rounding."""
    v2, v3 = (load_weights(ROOT / "weights" / f"{m}.toml") for m in ("trustscore-v2", "trustscore-v3"))
    for day in days:
        at = AT + day * MICROS_PER_DAY
        a, b = (score_columns(evidence, snapshots, w, at) for w in (v2, v3))
        counts = {"int": [0, 0], "float": [0, 0]}  # differing, compared
        for x, y in zip(to_ratings(a, v2), to_ratings(b, v3), strict=True):
            for kind, p, q in _leaves(msgspec.to_builtins(published(x)), msgspec.to_builtins(published(y))):
                counts[kind][0] += p != q
                counts[kind][1] += 1
        relative = max(
            float(
                np.nanmax(np.abs(getattr(b, f) - getattr(a, f)) / np.maximum(np.abs(getattr(a, f)), 1e-300))
            )
            for f in ("scores", "n_eff", "total_n_eff", "confidence")
        )
        print(
            f"trustscore-v3 vs v2 at AT{day:+d} days, {len(a.agents):,} agents: published integers differ "
            f"{counts['int'][0]:,} of {counts['int'][1]:,}; published 10^-6 numbers differ "
            f"{counts['float'][0]:,} of {counts['float'][1]:,}; largest relative difference before "
            f"rounding {relative:.1e}"
        )


def _leaves(x: object, y: object) -> list[tuple[str, object, object]]:
    """The published numbers of two ratings side by side, as ("int" | "float", v2's, v3's); the model's
    name and digest left out, a grade counted as an integer (it follows the total)."""
    if isinstance(x, dict) and isinstance(y, dict):
        keys = sorted((set(x) | set(y)) - {"model_version", "weights_digest", "agent"})
        return [leaf for k in keys for leaf in _leaves(x.get(k), y.get(k))]
    if isinstance(x, list | tuple) and isinstance(y, list | tuple):
        return [leaf for p, q in zip(x, y, strict=True) for leaf in _leaves(p, q)]
    if isinstance(x, list | tuple) or isinstance(y, list | tuple):  # an interval on one side only
        return [("int" if isinstance(x or y, int) else "float", x, y)]
    return [("float" if isinstance(x, float) or isinstance(y, float) else "int", x, y)]


def _same_columns(a: RatingColumns, b: RatingColumns) -> bool:
    """Bit for bit: every number's bytes (NaN, -0.0 and the last bit included)."""
    fields = (f for f in RatingColumns.__dataclass_fields__ if f != "agents")
    return a.agents == b.agents and all(
        np.asarray(getattr(a, f)).tobytes() == np.asarray(getattr(b, f)).tobytes() for f in fields
    )


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--agents", type=int, default=10_000)
    parser.add_argument("--sample", type=int, default=1_000, help="agents rated by the plain-Python baseline")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--refresh-agents", type=int, default=100_000)
    parser.add_argument("--refresh-items", default="1,10,30", help="items per agent, comma-separated")
    parser.add_argument(
        "--refresh-models", default="baseline-v0.3,trustscore-v2,trustscore-v3", help="comma-separated"
    )
    parser.add_argument("--against", metavar="REV", help="also time the engine of this git revision")
    parser.add_argument("--threads", type=int, default=2, help="score_columns(threads=) beside one thread")
    args = parser.parse_args()

    evidence, snapshots = synthetic(args.rows, args.agents)
    print(f"{args.rows:,} evidence rows, {len(snapshots):,} snapshots, {args.agents:,} agents")
    print(numpy_setting(NUMPY_CPU))
    results: dict[str, list[Rating]] = {}
    engine_rate = 0.0
    best_of: dict[str, float] = {}
    threads_differ = []
    for name in ("baseline-v0.3", "trustscore-v1", "trustscore-v2", "trustscore-v3"):
        weights = load_weights(ROOT / "weights" / f"{name}.toml")
        timings, threaded = [], []
        for _ in range(args.repeat):  # one thread and args.threads alternately
            results[name], seconds = recompute(evidence, snapshots, weights)
            timings.append(seconds)
            ratings, seconds = recompute(evidence, snapshots, weights, args.threads)
            threaded.append(seconds)
            if msgspec.json.encode(ratings) != msgspec.json.encode(results[name]):
                threads_differ.append(name)
        best, median = min(timings), statistics.median(timings)
        best_of[name] = best
        rate = args.rows / best
        if name == "baseline-v0.3":
            engine_rate = rate
        print(
            f"{name:>14}: full recompute {median:.3f} s median, {best:.3f} s best of {args.repeat}; {rate:,.0f} rows/s"
        )
        print(
            f"{'':>14}  in {args.threads} threads {statistics.median(threaded):.3f} s median, "
            f"{min(threaded):.3f} s best; one thread / {args.threads} = {median / statistics.median(threaded):.2f}x "
            f"(medians); identical: {name not in threads_differ}"
        )

    if args.against:
        old = engine_at(args.against)
        models = ("baseline-v0.3", "trustscore-v1", "trustscore-v2")
        if not all(before_after(old, evidence, snapshots, m, args.repeat, args.against) for m in models):
            print(f"the engine of {args.against} rates differently")
            return 1

    v2 = load_weights(ROOT / "weights" / "trustscore-v2.toml")
    rules = find_medal_rules(ROOT / "weights", v2)
    assert rules is not None
    medal_timings = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        awarded = medals_of(evidence, results["trustscore-v2"], rules, AT)
        medal_timings.append(time.perf_counter() - start)
    held = sum(m.medal is not None for a in awarded for m in a.dimensions.values())
    print(
        f"medals (trustscore-v2) of {len(awarded):,} agents: {min(medal_timings):.3f} s best of {args.repeat} "
        f"({held:,} medals held); {min(medal_timings) / best_of['trustscore-v2']:.2f}x the v2 recompute"
    )

    baseline = load_weights(ROOT / "weights" / "baseline-v0.3.toml")
    sample = np.random.default_rng(11).choice(args.agents, size=min(args.sample, args.agents), replace=False)
    expected, sample_rows, seconds = reference_sample(evidence, snapshots, baseline, sorted(sample.tolist()))
    python_rate = sample_rows / seconds
    by_agent = {r.agent: r for r in results["baseline-v0.3"]}
    fields = (
        "agent",
        "model_version",
        "total",
        "adjusted",
        "grade",
        "coverage",
        "confidence",
        "n",
        "dimensions",
    )
    mismatches = [
        agent
        for agent, ref in expected.items()
        if {f: msgspec.to_builtins(getattr(by_agent[agent], f)) for f in fields} != ref
    ]
    print(
        f"plain-Python baseline-v0.3 on {len(expected)} agents ({sample_rows:,} rows): {seconds:.3f} s; "
        f"{python_rate:,.0f} rows/s"
    )
    print(f"engine (baseline-v0.3, best) / plain-Python rate: {engine_rate / python_rate:,.1f}x")
    print(f"identical on the sample: {not mismatches} ({len(mismatches)} of {len(expected)} agents differ)")
    v2_v3_differences(evidence, snapshots, (0, 7, 90, -30))
    refreshed = [
        refresh_bench(model, args.refresh_agents, int(k), args.repeat)
        for model in args.refresh_models.split(",")
        if model
        for k in args.refresh_items.split(",")
        if k
    ]
    if not all(refreshed):
        print("refresh differs from the full recompute")
    if threads_differ:
        print(f"in {args.threads} threads the ratings differ: {', '.join(sorted(set(threads_differ)))}")
    return 1 if mismatches or not all(refreshed) or threads_differ else 0


if __name__ == "__main__":
    raise SystemExit(main())
