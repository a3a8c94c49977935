"""The preconditions of the column-wise struct builders (scoring/ratings.py) that their docstrings
state, and guards for what sharing empty cells across agents relies on (frozen, untracked structs)."""

from __future__ import annotations

import datetime as dt
import gc
import re
from pathlib import Path

import numpy as np
import pytest

from trustscore.scoring import EvidenceItem, load_weights, score_agents
from trustscore.scoring.inputs import EvidenceBatch
from trustscore.scoring.medals import load_medal_rules, medals_of, medals_path
from trustscore.scoring.ratings import _distinct_rows, row_dicts
from trustscore.scoring.times import to_micros
from trustscore.services.ratings import RatedAgent

from .conftest import AT, WEIGHTS

SRC = Path(__file__).resolve().parents[3] / "src"


def test_distinct_rows_never_merges_rows_with_negative_codes() -> None:
    """Packed 3 bits a code, -1 then 0 and 7 then -1 are both the key -1: two patterns became one. The
    fast path checks codes < 8 but not codes >= 0 (only the docstring says so)."""
    codes = np.array([[-1, 0], [7, -1]], dtype=np.int8)
    patterns, which = _distinct_rows(codes)
    assert np.array_equal(patterns[which], codes)


def test_row_dicts_refuses_cells_that_are_not_whole_rows() -> None:
    """zip(strict=False) over a short last slice gives a dict missing keys, silently."""
    with pytest.raises(ValueError):
        row_dicts(["a", "b"], [1, 2, 3])


def test_row_dicts_without_keys_is_a_clear_error() -> None:
    """range(0, n, 0) raises 'range() arg 3 must not be zero' (not reachable today: weights and medals
    files need at least one dimension)."""
    with pytest.raises(ValueError, match="key"):
        row_dicts([], [])


def _shared_cells() -> tuple[object, object]:
    weights = load_weights(WEIGHTS / "trustscore-v3.toml")
    first, other = weights.dimension_names[:2]
    evidence = [
        EvidenceItem(agent=a, dimension=first, source="real", value=0.9, at=AT - dt.timedelta(days=1))
        for a in ("a", "b")
    ]
    ratings = score_agents(evidence, None, weights, AT)
    rules = load_medal_rules(medals_path(WEIGHTS, weights.model_version), weights)
    medals = medals_of(EvidenceBatch.from_items(evidence), ratings, rules, to_micros(AT))
    a, b = ratings
    assert a.uncertainty is not None and b.uncertainty is not None
    assert a.uncertainty.dimensions[other] is b.uncertainty.dimensions[other]  # shared, as designed
    assert medals[0].dimensions[other] is medals[1].dimensions[other]
    return a.uncertainty.dimensions[other], medals[0].dimensions[other]


def test_shared_cells_are_immutable() -> None:
    for cell in _shared_cells():
        for field in cell.__struct_fields__:  # type: ignore[attr-defined]
            with pytest.raises(AttributeError):
                setattr(cell, field, None)


def test_nothing_in_the_package_writes_into_a_frozen_struct() -> None:
    """A shared cell written through one agent changes every agent's rating (and the medals' cells are
    module globals: every later refresh too). force_setattr is the one way past frozen=True."""
    offenders = [
        str(p.relative_to(SRC))
        for p in SRC.rglob("*.py")
        if re.search(r"force_setattr|object\.__setattr__", p.read_text(encoding="utf-8"))
    ]
    assert offenders == []


def test_rated_agents_and_their_containers_stay_untracked() -> None:
    """gc=False is sound only while nothing tracked hangs below: every container under a RatedAgent is
    untracked too (so no cycle can pass through one)."""
    weights = load_weights(WEIGHTS / "trustscore-v3.toml")
    evidence = [
        EvidenceItem(agent="a", dimension=weights.dimension_names[0], source="real", value=0.5, at=AT)
    ]
    (rating,) = score_agents(evidence, None, weights, AT)
    rated = RatedAgent(rating, AT, 1)
    assert rating.uncertainty is not None
    for obj in (rated, rating, rating.dimensions, rating.null_reasons, rating.uncertainty.dimensions):
        assert not gc.is_tracked(obj), obj
