"""The rating and medal structs built column-wise (shared cells, null reasons per pattern, flat lists)
equal, field for field and byte for byte, the straightforward construction one agent and cell at a time,
over random engine columns for every servable model."""

from __future__ import annotations

import math

import msgspec
import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trustscore.scoring import load_weights
from trustscore.scoring.engine import OK, REASONS, RatingColumns
from trustscore.scoring.medals import Medals, award, award_columns, load_medal_rules, medals_path
from trustscore.scoring.ratings import DimensionStats, Rating, Uncertainty, _distinct_rows, to_ratings
from trustscore.scoring.times import MICROS_PER_DAY
from trustscore.scoring.weights import Weights
from trustscore.settings import SERVABLE_MODELS

from .conftest import WEIGHTS

MODELS = {name: load_weights(WEIGHTS / f"{name}.toml") for name in SERVABLE_MODELS}
AT = 1_800_000_000_000_000
#: -0.0 and 0.0 are == but published differently: a shared struct must never turn one into the other.
SCALARS = st.sampled_from([0.0, -0.0, 1.0, 12.5, 99.999999, 1e-7]) | st.floats(0.0, 100.0)
OPTIONAL = SCALARS | st.just(math.nan)


def reference_ratings(columns: RatingColumns, weights: Weights) -> list[Rating]:
    """One agent at a time, every field spelled out (the construction before the column-wise one)."""
    names = weights.dimension_names
    out = []
    for i, agent in enumerate(columns.agents):
        dimensions: dict[str, float | None] = {}
        reasons: dict[str, str] = {}
        for d, name in enumerate(names):
            code = int(columns.reasons[i, d])
            dimensions[name] = float(columns.scores[i, d]) if code == OK else None
            if code != OK:
                reasons[f"dimensions.{name}"] = REASONS[code]
        total, adjusted = float(columns.total[i]), float(columns.adjusted[i])
        if math.isnan(total):
            reasons.update(dict.fromkeys(("total", "adjusted", "grade"), "no_scored_dimensions"))
        elif math.isnan(adjusted):
            reasons["adjusted"] = "no_evidence"
        confidence = float(columns.confidence[i])
        if math.isnan(confidence):
            reasons["confidence"] = "no_evidence"
        grade = None
        if not math.isnan(total):
            reached = [total >= t for t in weights.spec.grades.values()]
            grade = list(weights.spec.grades)[reached.index(True) if True in reached else 0]
        uncertainty = None
        if weights.spec.uncertainty is not None:
            stats = {}
            for d, name in enumerate(names):
                code = int(columns.interval_reasons[i, d])
                interval = (float(columns.low[i, d]), float(columns.high[i, d])) if code == OK else None
                stats[name] = DimensionStats(
                    n=int(columns.counts[i, d]), n_eff=float(columns.n_eff[i, d]), interval=interval
                )
                if code != OK:
                    reasons[f"uncertainty.dimensions.{name}.interval"] = REASONS[code]
            low, high = float(columns.total_low[i]), float(columns.total_high[i])
            if math.isnan(low):
                why = "no_scored_dimensions" if math.isnan(total) else "snapshot_only"
                reasons["uncertainty.total_interval"] = why
            uncertainty = Uncertainty(
                level=weights.spec.uncertainty.interval_level,
                n_eff=float(columns.total_n_eff[i]),
                total_interval=None if math.isnan(low) else (int(low), int(high)),
                dimensions=stats,
            )
        out.append(
            Rating(
                agent=agent,
                model_version=weights.model_version,
                weights_digest=weights.digest,
                total=None if math.isnan(total) else int(total),
                adjusted=None if math.isnan(adjusted) else int(adjusted),
                grade=grade,
                coverage=float(columns.coverage[i]),
                confidence=None if math.isnan(confidence) else confidence,
                n=int(columns.n[i]),
                dimensions=dimensions,
                null_reasons=reasons,
                uncertainty=uncertainty,
            )
        )
    return out


@st.composite
def engine_columns(draw: st.DrawFn, weights: Weights) -> RatingColumns:
    """Any columns the engine could hand over: every null pattern, -0.0 and 0.0, empty cells."""
    agents = draw(st.integers(0, 6))
    cells = (agents, len(weights.dimension_names))

    def floats(shape: tuple[int, ...], values: st.SearchStrategy[float] = SCALARS) -> np.ndarray:
        return np.array(draw(st.lists(values, min_size=math.prod(shape), max_size=math.prod(shape)))).reshape(
            shape
        )

    def codes(shape: tuple[int, ...], values: st.SearchStrategy[int]) -> np.ndarray:
        return np.array(
            draw(st.lists(values, min_size=math.prod(shape), max_size=math.prod(shape))), dtype=np.int64
        ).reshape(shape)

    reason_codes = st.sampled_from([OK, OK, *range(len(REASONS))])
    return RatingColumns(
        agents=tuple(f"a{i}" for i in range(agents)),
        scores=floats(cells),
        reasons=codes(cells, reason_codes).astype(np.int8),
        counts=codes(cells, st.sampled_from([0, 0, 1, 7])),
        n_eff=floats(cells),
        low=floats(cells),
        high=floats(cells),
        interval_reasons=codes(cells, reason_codes).astype(np.int8),
        coverage=floats((agents,)),
        total=floats((agents,), OPTIONAL),
        adjusted=floats((agents,), OPTIONAL),
        confidence=floats((agents,), OPTIONAL),
        n=codes((agents,), st.integers(0, 1000)),
        total_n_eff=floats((agents,)),
        total_low=floats((agents,), OPTIONAL),
        total_high=floats((agents,)),
    )


@settings(max_examples=150, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(data=st.data(), model=st.sampled_from(sorted(MODELS)))
def test_to_ratings_equals_the_agent_by_agent_construction(data: st.DataObject, model: str) -> None:
    weights = MODELS[model]
    columns = data.draw(engine_columns(weights))
    built, expected = to_ratings(columns, weights), reference_ratings(columns, weights)
    assert built == expected
    assert [msgspec.json.encode(r) for r in built] == [msgspec.json.encode(r) for r in expected]
    assert [list(r.null_reasons) for r in built] == [list(r.null_reasons) for r in expected]  # key order
    for r in built:  # copies, never one dict shared between agents
        assert all(r.null_reasons is not other.null_reasons for other in built if other is not r)


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(data=st.data(), model=st.sampled_from([m for m in sorted(MODELS) if medals_path(WEIGHTS, m).exists()]))
def test_award_columns_equals_award_cell_by_cell(data: st.DataObject, model: str) -> None:
    weights = MODELS[model]
    rules = load_medal_rules(medals_path(WEIGHTS, model), weights)
    ratings = to_ratings(data.draw(engine_columns(weights)), weights)
    shape = (len(ratings), len(rules.spec.thresholds))
    size = math.prod(shape)
    real_n = np.array(
        data.draw(st.lists(st.sampled_from([0, 0, 1, 2, 5]), min_size=size, max_size=size)), dtype=np.int64
    )
    ages = np.array(
        data.draw(st.lists(st.integers(0, 400 * MICROS_PER_DAY), min_size=size, max_size=size)),
        dtype=np.int64,
    )
    newest = np.where(real_n > 0, AT - ages, np.iinfo(np.int64).min).reshape(shape)
    real_n = real_n.reshape(shape)
    built = award_columns(ratings, real_n, newest, rules, AT)
    expected = []
    for i, rating in enumerate(ratings):
        cells = {}
        for d, name in enumerate(rules.spec.thresholds):
            n = int(real_n[i, d])
            decay = None  # no real item: no freshness
            if n > 0:
                age_days = (AT - newest[i, d]) / MICROS_PER_DAY
                decay = float(np.power(0.5, age_days / rules.spec.half_life_days))
            cells[name] = award(
                rating.dimensions.get(name),
                n,
                decay,
                rules.spec.thresholds[name],
                rules.spec,
            )
        expected.append(Medals(rules_digest=rules.digest, dimensions=cells))
    assert built == expected
    assert [msgspec.json.encode(m) for m in built] == [msgspec.json.encode(m) for m in expected]


@settings(max_examples=100, deadline=None)
@given(
    rows=st.integers(1, 30),
    width=st.sampled_from([1, 10, 21, 22, 40]),  # 21 codes of 3 bits fit one int64 key, 22 do not
    top=st.sampled_from([2, 8, 9, 120]),  # codes of 8 and more do not fit 3 bits
    data=st.data(),
)
def test_distinct_rows_numbers_each_row_by_its_pattern(
    rows: int, width: int, top: int, data: st.DataObject
) -> None:
    """Both ways of finding the patterns (one int64 key per row, or rows compared whole) give each row
    the index of a pattern equal to it, and distinct patterns."""
    values = data.draw(st.lists(st.integers(0, top - 1), min_size=rows * width, max_size=rows * width))
    codes = np.array(values, dtype=np.int8).reshape(rows, width)
    patterns, which = _distinct_rows(codes)
    assert np.array_equal(patterns[which], codes)
    assert len({row.tobytes() for row in patterns}) == len(patterns)


def test_codes_too_large_for_three_bits_are_not_packed() -> None:
    """8 in the first column is 1 in the second when packed 3 bits a code: the rows must stay apart."""
    codes = np.array([[8, 0], [0, 1]], dtype=np.int8)
    patterns, which = _distinct_rows(codes)
    assert np.array_equal(patterns[which], codes) and len(patterns) == 2
