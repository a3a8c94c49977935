"""Review of the 'structs' merge: the column-wise builders against the pre-merge code itself (7dbdcc9),
on real engine output (random evidence and snapshots, every servable model, with medals)."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trustscore.scoring import EvidenceBatch, EvidenceItem, Snapshot, SnapshotBatch, load_weights
from trustscore.scoring import medals as new_medals
from trustscore.scoring import ratings as new_ratings
from trustscore.scoring.engine import score_columns
from trustscore.scoring.medals import load_medal_rules, medals_path, real_items
from trustscore.scoring.times import to_micros
from trustscore.settings import SERVABLE_MODELS

from .conftest import AT, WEIGHTS
from .test_struct_building import engine_columns

ROOT = Path(__file__).resolve().parents[3]
BEFORE = "7dbdcc9"  # main before the merge of 'structs'


def _load(name: str, path: str) -> ModuleType:
    """The module at ``path`` as it was at :data:`BEFORE` (skipped without git history)."""
    try:
        source = subprocess.run(
            ["git", "-C", str(ROOT), "show", f"{BEFORE}:{path}"], capture_output=True, check=True, text=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip(f"no git history with {BEFORE}", allow_module_level=True)
    mod = ModuleType(name)
    sys.modules[name] = mod
    exec(compile(source, f"{BEFORE}:{path}", "exec"), mod.__dict__)
    return mod


old_ratings = _load("old_ratings", "src/trustscore/scoring/ratings.py")
for cls in ("Rating", "Uncertainty", "DimensionStats"):
    setattr(old_ratings, cls, getattr(new_ratings, cls))
old_medals = _load("old_medals", "src/trustscore/scoring/medals.py")
for cls in ("Medals", "DimensionMedal"):
    setattr(old_medals, cls, getattr(new_medals, cls))

MODELS = {m: load_weights(WEIGHTS / f"{m}.toml") for m in SERVABLE_MODELS}
DIMS = MODELS["trustscore-v3"].dimension_names
times = st.integers(min_value=-2, max_value=900).map(lambda d: AT - dt.timedelta(days=d))
items = st.builds(
    EvidenceItem,
    agent=st.sampled_from([f"a{i}" for i in range(12)]),
    dimension=st.sampled_from(DIMS),
    source=st.sampled_from(("real", "real-benchmark", "arena", "verified", "self-reported", "gossip")),
    at=times,
    value=st.one_of(st.none(), st.floats(-0.5, 1.5), st.sampled_from([0.0, -0.0, 1.0])),
    result=st.sampled_from(["success", "partial", "failure"]),
    key=st.one_of(st.none(), st.sampled_from(["q1", "q2"])),
    issuer=st.one_of(st.none(), st.sampled_from(["x", "y", "server-reverify"])),
    extra_weight=st.sampled_from([1.0, 0.5, 0.0]),
)
snaps = st.builds(
    Snapshot,
    agent=st.sampled_from([f"a{i}" for i in range(14)]),
    at=times,
    total=st.one_of(st.none(), st.integers(0, 1000)),
    model_version=st.sampled_from(["baseline-v0.2", "baseline-v0.3"]),
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    ev=st.lists(items, max_size=80), sn=st.lists(snaps, max_size=15), model=st.sampled_from(SERVABLE_MODELS)
)
def test_new_builders_equal_the_pre_merge_code(
    ev: list[EvidenceItem], sn: list[Snapshot], model: str
) -> None:
    weights = MODELS[model]
    batch = EvidenceBatch.from_items(ev, seq=list(range(len(ev))))
    columns = score_columns(batch, SnapshotBatch.from_items(sn), weights, to_micros(AT), None)
    new, old = new_ratings.to_ratings(columns, weights), old_ratings.to_ratings(columns, weights)
    assert new == old
    assert [msgspec.json.encode(r) for r in new] == [msgspec.json.encode(r) for r in old]
    assert [list(r.null_reasons) for r in new] == [list(r.null_reasons) for r in old]
    path = medals_path(WEIGHTS, model)
    if path.exists():
        rules = load_medal_rules(path, weights)
        real_n, newest = real_items(batch, [r.agent for r in new], rules, to_micros(AT))
        # real_items rows are per agent of the batch; align with the columns' agents
        m_new = new_medals.award_columns(new, real_n, newest, rules, to_micros(AT))
        m_old = old_medals.award_columns(old, real_n, newest, rules, to_micros(AT))
        assert m_new == m_old
        assert [msgspec.json.encode(m) for m in m_new] == [msgspec.json.encode(m) for m in m_old]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), model=st.sampled_from(SERVABLE_MODELS))
def test_synthetic_columns_equal_the_pre_merge_code(data: st.DataObject, model: str) -> None:
    weights = MODELS[model]
    columns = data.draw(engine_columns(weights))
    new, old = new_ratings.to_ratings(columns, weights), old_ratings.to_ratings(columns, weights)
    assert new == old
    assert [msgspec.json.encode(r) for r in new] == [msgspec.json.encode(r) for r in old]
    assert [list(r.null_reasons) for r in new] == [list(r.null_reasons) for r in old]
