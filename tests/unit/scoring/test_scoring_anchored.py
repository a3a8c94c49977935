"""trustscore-v3: decay anchored in time (docs/methodology.md, "trustscore-v3").

Its refresh (scoring/refresh.py) keeps per-cell sums of time-independent weights and scales them to the
rating time by one factor per cell, so the full recompute is *defined* by the same factorised formula: the
refresh must equal it bit for bit at every time, across rows that become due, time going back, and
arrivals, while reading no evidence until a row becomes due.
"""

from __future__ import annotations

import msgspec
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trustscore.errors import ConfigError, InvalidInput
from trustscore.scoring import EvidenceBatch, EvidenceItem, SnapshotBatch, load_weights
from trustscore.scoring.anchored import RANGE_HALF_LIVES
from trustscore.scoring.engine import RatingColumns, score_columns
from trustscore.scoring.refresh import RatingState
from trustscore.scoring.times import MICROS_PER_DAY, from_micros, parse_time

from .conftest import WEIGHTS, variant
from .test_scoring_pinned import AT, columns_digest, rich_evidence

V2 = load_weights(WEIGHTS / "trustscore-v2.toml")
V3 = load_weights(WEIGHTS / "trustscore-v3.toml")
ANCHOR = parse_time("2026-01-01T00:00:00Z")
DECAY = "[decay]\nhalf_life_days = 30.0\n"
#: trustscore-v1 anchored: the issuer cap, snapshot consistency and suppression on anchored weights.
V1_ANCHORED = variant("test-v1-anchored", {DECAY: DECAY + 'anchor = "2026-01-01T00:00:00Z"\n'})
HOUR = MICROS_PER_DAY // 24
SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


class Log:
    """The caller's side: the rows logged so far (``visible``), and which agents the state asked for."""

    def __init__(self, evidence: EvidenceBatch, snapshots: SnapshotBatch, visible: np.ndarray) -> None:
        self.evidence, self.snapshots, self.visible = evidence, snapshots, visible
        self.asked: list[tuple[str, ...]] = []

    def logged(self) -> EvidenceBatch:
        return self.evidence.take(np.flatnonzero(self.visible))

    def rows_of(self, names: tuple[str, ...]) -> tuple[EvidenceBatch, SnapshotBatch]:
        self.asked.append(names)
        wanted = np.isin(np.array(self.evidence.agents), names)[self.evidence.agent] & self.visible
        return self.evidence.take(np.flatnonzero(wanted)), self.snapshots


def full(log: Log, weights: object, at: int) -> RatingColumns:
    return score_columns(log.logged(), log.snapshots, weights, at)  # type: ignore[arg-type]


@SETTINGS
@given(
    seed=st.integers(0, 2**32 - 1),
    agents=st.integers(1, 80),
    rows=st.integers(0, 1_500),
    model=st.sampled_from([V3, V1_ANCHORED]),
    steps=st.lists(st.integers(-4 * MICROS_PER_DAY, 8 * MICROS_PER_DAY), min_size=1, max_size=8),
    arrival_step=st.integers(0, 8),
)
def test_refresh_is_the_full_recompute_bit_for_bit(
    seed: int,
    agents: int,
    rows: int,
    model: object,
    steps: list[int],
    arrival_step: int,
) -> None:
    # Thin and thick agents, superseded keyed rows, rows up to 5 days ahead, extra weights, snapshots.
    evidence, snapshots = rich_evidence(rows, agents, seed)
    arriving = np.random.default_rng(seed + 1).random(rows) < 0.15  # logged later, delivered by update()
    log = Log(evidence, snapshots, ~arriving)
    state = RatingState(model)  # type: ignore[arg-type]
    state.update(log.logged(), snapshots, AT)
    at = AT
    for step, offset in enumerate(steps):  # forward and back, across rows becoming due
        if step == arrival_step:
            log.visible = np.ones(rows, dtype=np.bool_)
            touched = tuple(sorted({evidence.agents[a] for a in evidence.agent[arriving]}))
            state.update(*log.rows_of(touched), at, touched)
        at = AT + offset
        assert columns_digest(state.refresh(at, log.rows_of)) == columns_digest(full(log, model, at)), at


@pytest.mark.parametrize("model", [V3, V1_ANCHORED], ids=["trustscore-v3", "v1-anchored"])
def test_refresh_reads_no_rows_until_a_row_becomes_due(model: object) -> None:
    evidence, snapshots = rich_evidence()
    state = RatingState(model)  # type: ignore[arg-type]
    state.update(evidence, snapshots, AT)
    log = Log(evidence, snapshots, np.ones(len(evidence), dtype=np.bool_))
    first_due = int(min(evidence.at[evidence.at > AT].min(), snapshots.at[snapshots.at > AT].min()))
    for at in (AT + 1, first_due - 1, AT):  # the same rows count: only the factor moves
        assert columns_digest(state.refresh(at, log.rows_of)) == columns_digest(full(log, model, at))
    assert log.asked == []  # O(agents × dimensions): no pass over evidence
    assert columns_digest(state.refresh(first_due, log.rows_of)) == columns_digest(
        full(log, model, first_due)
    )
    due = {evidence.agents[a] for a in evidence.agent[evidence.at == first_due]}
    due |= {snapshots.agents[a] for a in snapshots.agent[snapshots.at == first_due]}
    assert [set(names) for names in log.asked] == [due]  # only the agents whose counted rows changed


def test_an_arrival_reads_only_its_agents_rows() -> None:
    evidence, snapshots = rich_evidence()
    arriving = evidence.seq >= evidence.seq.size - 300
    log = Log(evidence, snapshots, ~arriving)
    state = RatingState(V3)
    state.update(log.logged(), snapshots, AT)
    log.visible[:] = True
    touched = tuple(sorted({evidence.agents[a] for a in evidence.agent[arriving]}))
    state.update(*log.rows_of(touched), AT, touched)
    log.asked.clear()
    assert columns_digest(state.refresh(AT + 1, log.rows_of)) == columns_digest(full(log, V3, AT + 1))
    assert log.asked == []  # unlike trustscore-v2, an update does not make the next refresh read every row


def test_v3_is_v2_up_to_the_last_bits() -> None:
    # Mathematically the same model: every count and null identical, every float within a few ulps.
    evidence, snapshots = rich_evidence()
    for days in (0, 7, -30, 400):
        at = AT + days * MICROS_PER_DAY
        v2, v3 = (score_columns(evidence, snapshots, w, at) for w in (V2, V3))
        for name in RatingColumns.__dataclass_fields__:
            a, b = np.asarray(getattr(v2, name)), np.asarray(getattr(v3, name))
            if a.dtype.kind == "f":
                assert np.array_equal(np.isnan(a), np.isnan(b)), name
                np.testing.assert_allclose(b, a, rtol=1e-12, atol=1e-12, err_msg=name)
            else:
                assert np.array_equal(a, b), name


def test_v3_has_v2s_numbers_exactly_plus_the_anchor() -> None:
    assert V2.spec.decay is not None
    assert V3.spec.decay is not None
    unanchored = msgspec.structs.replace(V3.spec.decay, anchor=None)
    same = msgspec.structs.replace(
        V3.spec, model_version=V2.model_version, description=V2.spec.description, decay=unanchored
    )
    assert same == V2.spec
    assert V3.decay_anchor == ANCHOR and V2.decay_anchor is None


def test_weights_of_v3_are_time_independent_and_anchored() -> None:
    assert V3.spec.decay is not None and V3.spec.decay.anchor == "2026-01-01T00:00:00Z"
    assert V2.spec.decay is not None and V2.spec.decay.anchor is None  # released files parse as before
    drop = {'anchor = "2026-01-01T00:00:00Z"': 'anchor = "2026-01-01T00:00:00+01:00"'}
    with pytest.raises(ConfigError, match="anchor"):
        variant("test-bad-anchor", drop, base="trustscore-v3")


LIMIT = RANGE_HALF_LIVES * 30 * MICROS_PER_DAY  # the range at trustscore-v3's 30-day half-life


def one_item(when: int, key: str | None = None) -> EvidenceBatch:
    return EvidenceBatch.from_items(
        [
            EvidenceItem(
                agent="a", dimension="capability", source="real", value=0.8, key=key, at=from_micros(when)
            )
        ]
    )


def test_the_range_is_960_half_lives_of_the_anchor_and_every_number_is_finite_up_to_it() -> None:
    assert RANGE_HALF_LIVES == 960
    empty = SnapshotBatch.empty()
    for when in (ANCHOR - LIMIT, ANCHOR + LIMIT):  # 2^-960 and 2^960 times one factor: weight 1
        columns = score_columns(one_item(when), empty, V3, when)
        assert columns.total_n_eff[0] == columns.n_eff[0, 0] == 1.0  # exact: 2^±960 are exact
        assert columns.scores[0, 0] == pytest.approx(100 * 0.8 / 3)  # shrunk towards 0 below weight 3
    oldest = score_columns(one_item(ANCHOR - LIMIT), empty, V3, ANCHOR + LIMIT)  # 1920 half-lives old
    assert oldest.n[0] == 1 and oldest.total_n_eff[0] == 0.0  # 2^-1920 underflows to 0, as in v2
    assert np.isnan(oldest.total[0]) == np.isnan(
        score_columns(one_item(ANCHOR - LIMIT), empty, V2, ANCHOR + LIMIT).total[0]
    )


@pytest.mark.parametrize(
    ("when", "at"),
    [
        (ANCHOR - LIMIT - 1, ANCHOR),  # evidence too old
        (ANCHOR, ANCHOR + LIMIT + 1),  # rating time too late
        (ANCHOR - LIMIT - 1, ANCHOR - LIMIT - 1),  # both too early
    ],
)
def test_times_outside_the_range_are_refused(when: int, at: int) -> None:
    with pytest.raises(InvalidInput, match="960 half-lives"):
        score_columns(one_item(when), SnapshotBatch.empty(), V3, at)


def test_the_state_refuses_times_outside_the_range() -> None:
    state = RatingState(V3)
    state.update(one_item(ANCHOR), SnapshotBatch.empty(), ANCHOR)
    with pytest.raises(InvalidInput, match="960 half-lives"):
        state.refresh(ANCHOR + LIMIT + 1, lambda names: pytest.fail("no rows to read"))
    with pytest.raises(InvalidInput, match="960 half-lives"):
        state.update(one_item(ANCHOR - LIMIT - 1), SnapshotBatch.empty(), ANCHOR)


def test_a_superseded_row_outside_the_range_is_not_refused() -> None:
    # Only counted rows are weighed: a keyed row replaced by a newer one never reaches the exponent.
    old, new = one_item(ANCHOR - LIMIT - 1, key="q"), one_item(ANCHOR, key="q")
    both = EvidenceBatch(
        **{
            **new.__dict__,
            "at": np.concatenate((old.at, new.at)),
            "key": np.array([0, 0]),
            **{
                c: np.concatenate((getattr(old, c), getattr(new, c)))
                for c in ("agent", "dimension", "source", "issuer", "value", "result", "extra_weight")
            },
            "seq": np.array([0, 1]),
        }
    )
    assert score_columns(both, SnapshotBatch.empty(), V3, ANCHOR).n[0] == 1
