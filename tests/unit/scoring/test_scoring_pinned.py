"""Pins every output bit of the engine for every released model on a rich synthetic evidence set.

The engine's arithmetic may be reorganised for speed (``docs/methodology.md``, "Engine and performance"),
but a released model's numbers never change: each digest below is the sha256 of the ``repr`` of every
number the engine returns (and of the published rating structs), computed before any optimisation.
trustscore-v3's were recorded when it was released; its item weights and decay factor use only IEEE
additions and multiplications (scoring/anchored.py), not a platform's pow. trustscore-v1's and v2's were
recorded again on 2026-12-01, when their decay factor moved from numpy's pow to that same exp2: numpy's
pow gives other last bits with AVX-512 than without, so their first digests held only on some machines
(docs/methodology.md, "Arithmetic").
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import msgspec
import numpy as np
import pytest

from trustscore.scoring import EvidenceBatch, SnapshotBatch, load_weights
from trustscore.scoring.engine import RatingColumns, score_columns
from trustscore.scoring.ratings import to_ratings
from trustscore.scoring.times import MICROS_PER_DAY, parse_time

ROOT = Path(__file__).resolve().parents[3]
AT = parse_time("2026-11-30T00:00:00Z")
#: Spelled out here, not imported from kinds/graded.py: the pinned set must not move if that list does.
DIMENSIONS = (
    "capability",
    "reliability",
    "delivery",
    "economic",
    "collaboration",
    "security",
    "negotiation",
    "integrity",
)
SOURCES = ("real", "real-benchmark", "arena", "verified", "benchmark", "self-reported", "tavern-event")


def rich_evidence(
    rows: int = 6_000, agents: int = 240, seed: int = 16
) -> tuple[EvidenceBatch, SnapshotBatch]:
    """Thin and thick agents, keyed re-submissions, capped and exempt issuers, extra weights, future rows,
    repeated values and times, out-of-range values, snapshots of two model versions."""
    rng = np.random.default_rng(seed)
    agent = (rng.pareto(1.2, rows) * 7).astype(np.int64) % agents  # a few heavy agents, many thin
    has_value = rng.random(rows) < 0.6
    value = np.where(has_value, np.round(rng.uniform(-0.2, 1.2, rows), 2), np.nan)
    result = np.where(has_value, -1, rng.integers(0, 3, rows)).astype(np.int8)
    key = np.where(rng.random(rows) < 0.4, rng.integers(0, 12, rows), -1)
    issuer = np.where(rng.random(rows) < 0.6, rng.integers(0, 9, rows), -1)
    day = rng.integers(-5, 200, rows)
    at = (
        AT - day * MICROS_PER_DAY - np.where(rng.random(rows) < 0.5, 0, rng.integers(0, MICROS_PER_DAY, rows))
    )
    extra = np.where(rng.random(rows) < 0.7, 1.0, np.round(rng.random(rows), 3))
    evidence = EvidenceBatch(
        agents=tuple(f"agent-{i:04d}" for i in range(agents)),
        dimensions=DIMENSIONS,
        sources=SOURCES,
        issuers=("server-reverify", *(f"issuer-{i}" for i in range(8))),
        agent=agent,
        dimension=rng.integers(0, len(DIMENSIONS), rows),
        source=rng.integers(0, len(SOURCES), rows),
        issuer=issuer,
        key=key,
        value=value,
        result=result,
        at=at,
        extra_weight=extra,
        seq=rng.permutation(rows).astype(np.int64),
    )
    snap_agent = rng.integers(0, agents + 20, 900) % (agents + 20)
    has_total = rng.random(900) < 0.9
    snapshots = SnapshotBatch(
        agents=(*evidence.agents, *(f"snap-only-{i}" for i in range(20))),
        model_versions=("baseline-v0.2", "baseline-v0.3"),
        agent=snap_agent,
        at=AT - rng.integers(-10, 120, 900) * MICROS_PER_DAY,
        total=np.where(has_total, rng.integers(200, 900, 900), 0),
        has_total=has_total,
        model_version=rng.integers(0, 2, 900),
    )
    return evidence, snapshots


def columns_digest(columns: RatingColumns) -> str:
    """sha256 of the repr of every number in ``columns`` (NaN, -0.0 and the last bit all count)."""
    h = hashlib.sha256(repr(columns.agents).encode())
    for name in RatingColumns.__dataclass_fields__:
        if name == "agents":
            continue
        array = np.asarray(getattr(columns, name))
        h.update(name.encode())
        h.update(repr(array.dtype).encode() + repr(array.shape).encode())
        h.update(" ".join(repr(x) for x in array.ravel().tolist()).encode())
    return h.hexdigest()


PINNED = {
    # (model, days after AT): (columns digest, ratings JSON digest)
    ("baseline-v0.3", 0): (
        "7897f21e55ab69200d2aada94ca3f9d85461b393a86988dd29b9c931390e59fd",
        "736c7ca8b2e781363d1bea393d0fbfe621b5706df0551dc26dbaff63819625b0",
    ),
    ("baseline-v0.3", 7): (
        "cd3970c1a9fb2e76bf305f0d303ab1cd3716a1bb28c9013e0544928dafac3587",
        "9d8d5544a50ecae1d0fde72bdb60cc67640c168288a7963aa17b7d41881d419d",
    ),
    ("baseline-v0.3", -30): (
        "1d987cf3f73354387ec5a840659b38c7ee4ec7a16885da3b9df04421fb748bd7",
        "80b37b1631e9e32331ebe47e97c38936bb5c1333278686e65b86ff44effca9f3",
    ),
    ("trustscore-v1", 0): (
        "a70db01b89de1888fe9de94663aeb8786173aa964b2dcca98da7c1de7ac8ec08",
        "82e68a18cdf6e78ae3f1f360134f61d3e047abeeff6837099f14ef984d3ac532",
    ),
    ("trustscore-v1", 7): (
        "0a608cb1d59edad1f2a1bf99838d845b7122e12b7a0848a7b7109d1ab1707ca9",
        "37a1c74e775c27c35a4ac27abeed705799f8b4617308bbd6403ec7c463d03567",
    ),
    ("trustscore-v1", -30): (
        "7513662a206246754f28d585e5b99906d8d899440e09383982177cdb938de09f",
        "e267a92bb9edc7a428b0bf2e8f2a69d6ca88cea53473a95dba9034b335903ab7",
    ),
    ("trustscore-v2", 0): (
        "8b313de00fdd56e170619d6a481561e3f150cf727030c28be2a074bb1bb31f2c",
        "16a76db1d345a9e046296ebe7ba00fbace5bc1f6472aa155eb1062ec18fd5073",
    ),
    ("trustscore-v2", 7): (
        "ddd61a9678b7d84c3ae12639ec0c36813cdc76f15b50e9b07ed3b07936f7ebdc",
        "e73136469ad0fd0662259e3f406c05d8c0537be331964da54f2c9f7179826c88",
    ),
    ("trustscore-v2", -30): (
        "ce29dfddc4b5278f335340feb2d994b0651f88b5d8f336bbae525cbdc35d5754",
        "3fca88f5ee1b149d86ddad391cd0ffe7e3ea793ad84627b14ffc0815376dc270",
    ),
    ("trustscore-v3", 0): (
        "6737b88fe641ae4cc16b05bc26253238c39ee6c7b7e764d23c87a6af0edab8e6",
        "3d5437a5f95dc316a89dec55333d7372eb9f40e5d42c0a90a8abf42bf4bf92b4",
    ),
    ("trustscore-v3", 7): (
        "db9d801ebb7471bc1b95083465c9e87a59626442158536644ca54ac4dafacbf9",
        "3be4bcf539f65c4a737626850e446f2da887258168eec0f31fd26379de0e7092",
    ),
    ("trustscore-v3", -30): (
        "9aaa5b055ff5188bb5b12caeb5f3413d944c7d11001e26ce5a3f5befe54662bd",
        "a66137b5ecb486f2414084b5522f8af6a23da6aa86e111cb8c4d6993210046de",
    ),
}

MODELS = ("baseline-v0.3", "trustscore-v1", "trustscore-v2", "trustscore-v3")
CASES = [(m, d) for m in MODELS for d in (0, 7, -30)]


@pytest.mark.parametrize(("model", "days"), CASES)
def test_released_models_outputs_are_pinned_bit_for_bit(model: str, days: int) -> None:
    evidence, snapshots = rich_evidence()
    weights = load_weights(ROOT / "weights" / f"{model}.toml")
    columns = score_columns(evidence, snapshots, weights, AT + days * MICROS_PER_DAY)
    ratings = hashlib.sha256(msgspec.json.encode(to_ratings(columns, weights))).hexdigest()
    assert (columns_digest(columns), ratings) == PINNED[(model, days)]
