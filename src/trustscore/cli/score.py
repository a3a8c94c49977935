"""``trustscore score``: rate agents offline from evidence and snapshot files under a weights file.

Prints one JSON rating per line, sorted by agent id, for every agent in the evidence or the snapshots,
its floats rounded to 10^-6 exactly as the API publishes them (docs/methodology.md), with its ``medals``
when the weights file has a medals file beside it (the newest release, ``<model>.medals[-N].toml``, as the
server serves them; ``--medals`` names an earlier release, to recompute medals awarded under it).
Only rows with ``at`` <= ``--at`` count. Every bad input line is reported (file and line number) and
nothing is scored.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import msgspec

from trustscore.cli import common
from trustscore.errors import InvalidInput
from trustscore.scoring import SnapshotBatch, load_weights
from trustscore.scoring.engine import score_columns
from trustscore.scoring.medals import Medals, find_medal_rules, load_medal_rules, medals_of
from trustscore.scoring.parse_jsonl import LineError, parse_evidence, parse_snapshots
from trustscore.scoring.publish import published
from trustscore.scoring.ratings import Rating, to_ratings
from trustscore.scoring.times import parse_time

#: More threads than this gain nothing on the engine's passes, which are bound by memory.
MAX_THREADS = 8


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "score",
        help="rate agents offline from evidence JSONL under a weights file",
        description=__doc__,
    )
    parser.add_argument(
        "--weights", required=True, type=Path, help="weights file, e.g. weights/baseline-v0.3.toml"
    )
    parser.add_argument("--evidence", required=True, type=Path, help="evidence JSON Lines (- for stdin)")
    parser.add_argument("--snapshots", type=Path, help="score snapshot JSON Lines (for reliability)")
    parser.add_argument("--at", required=True, help="rating time, RFC 3339 UTC (e.g. 2026-11-30T00:00:00Z)")
    parser.add_argument(
        "--medals",
        type=Path,
        help="a medals file of the weights file's model (default: the newest release beside it)",
    )
    parser.add_argument(
        "--threads",
        type=common.bounded(1, MAX_THREADS),
        default=min(_usable_cpus(), MAX_THREADS),
        help=f"rate runs of agents in this many threads, 1..{MAX_THREADS} (default: the usable CPUs, at "
        f"most {MAX_THREADS}); the output is the same for any number",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    weights = load_weights(args.weights)
    at = parse_time(args.at)
    evidence, errors = parse_evidence(_read(args.evidence), dimensions=weights.dimension_names)
    bad = _report(args.evidence, errors)
    snapshots = SnapshotBatch.empty()
    if args.snapshots is not None:
        snapshots, errors = parse_snapshots(_read(args.snapshots))
        bad += _report(args.snapshots, errors)
    if bad:
        raise InvalidInput(f"{bad} bad input line(s); nothing was scored")
    encoder = msgspec.json.Encoder()
    out = sys.stdout.buffer
    ratings = to_ratings(score_columns(evidence, snapshots, weights, at, threads=args.threads), weights)
    rules = (
        find_medal_rules(args.weights.parent, weights)
        if args.medals is None
        else load_medal_rules(args.medals, weights)
    )
    medals = [None] * len(ratings) if rules is None else medals_of(evidence, ratings, rules, at)
    for rating, medal in zip(ratings, medals, strict=True):
        line = published(rating)  # rounded like the API's (scoring.publish)
        if medal is not None:
            line = ScoredLine(**msgspec.structs.asdict(line), medals=medal)
        out.write(encoder.encode(line) + b"\n")
    out.flush()
    return 0


class ScoredLine(Rating, frozen=True, kw_only=True, omit_defaults=True, gc=False):
    """A rating line with its medals (docs/methodology.md, "Medals")."""

    medals: Medals | None = None


def _usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask where the platform has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def _read(path: Path) -> bytes:
    return common.read_bytes(path)


def _report(path: Path, errors: list[LineError]) -> int:
    for error in errors:
        print(f"{path}:{error.line}: {error.message}", file=sys.stderr)
    return len(errors)
