"""The incremental refresh (scoring/refresh.py) gives the full recompute bit for bit, at every time."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from trustscore.scoring import EvidenceBatch, SnapshotBatch, load_weights
from trustscore.scoring.engine import score_columns
from trustscore.scoring.refresh import RatingState
from trustscore.scoring.times import MICROS_PER_DAY

from .test_scoring_pinned import AT, columns_digest, rich_evidence

ROOT = Path(__file__).resolve().parents[3]
MODELS = ("baseline-v0.3", "trustscore-v1", "trustscore-v2", "trustscore-v3")
HOUR = MICROS_PER_DAY // 24
# Forward by hours and days (rows dated up to 5 days ahead become due), then back in time.
TIMES = [AT + h * HOUR for h in (1, 2, 30, 31, 24 * 4 + 7, 24 * 6, 24 * 40)] + [AT - 3 * MICROS_PER_DAY, AT]


class Log:
    """The caller's side: every agent's rows, and a record of which agents the state asked for."""

    def __init__(self, evidence: EvidenceBatch, snapshots: SnapshotBatch) -> None:
        self.evidence, self.snapshots = evidence, snapshots
        self.asked: list[tuple[str, ...]] = []

    def rows_of(self, names: tuple[str, ...]) -> tuple[EvidenceBatch, SnapshotBatch]:
        self.asked.append(names)
        wanted = np.isin(np.array(self.evidence.agents), names)[self.evidence.agent]
        return self.evidence.take(np.flatnonzero(wanted)), self.snapshots


def checks(at: int, state: RatingState, log: Log) -> None:
    """The state's refresh at ``at`` is the full recompute over the log, bit for bit."""
    full = score_columns(log.evidence, log.snapshots, state.weights, at)
    assert columns_digest(state.refresh(at, log.rows_of)) == columns_digest(full), at


def started(model: str) -> tuple[RatingState, Log]:
    """A state of ``model`` rated at AT from the rich evidence set, and the log it reads."""
    evidence, snapshots = rich_evidence()
    state = RatingState(load_weights(ROOT / "weights" / f"{model}.toml"))
    state.update(evidence, snapshots, AT)
    return state, Log(evidence, snapshots)


@pytest.mark.parametrize("model", MODELS)
def test_refresh_equals_the_full_recompute_bit_for_bit_at_every_time(model: str) -> None:
    state, log = started(model)
    for at in TIMES:
        checks(at, state, log)


def test_baseline_refresh_reads_no_rows_until_a_row_becomes_due() -> None:
    evidence, snapshots = rich_evidence()
    weights = load_weights(ROOT / "weights" / "baseline-v0.3.toml")
    state = RatingState(weights)
    state.update(evidence, snapshots, AT)
    log = Log(evidence, snapshots)
    first_due = int(min(evidence.at[evidence.at > AT].min(), snapshots.at[snapshots.at > AT].min()))
    before = state.refresh(first_due - 1, log.rows_of)
    assert log.asked == []  # O(agents): only the freshness factor moved
    assert not np.array_equal(before.adjusted, score_columns(evidence, snapshots, weights, AT).adjusted, True)
    state.refresh(first_due, log.rows_of)
    due = {evidence.agents[a] for a in evidence.agent[evidence.at == first_due]}
    due |= {snapshots.agents[a] for a in snapshots.agent[snapshots.at == first_due]}
    assert len(log.asked) == 1
    assert set(log.asked[0]) == due  # only the agents whose counted rows changed


@pytest.mark.parametrize("model", MODELS)
def test_an_arrival_recomputes_only_its_agent_and_keeps_identity(model: str) -> None:
    evidence, snapshots = rich_evidence()
    weights = load_weights(ROOT / "weights" / f"{model}.toml")
    arriving = evidence.seq >= evidence.seq.size - 300  # the last 300 log entries arrive later
    state = RatingState(weights)
    state.update(evidence.take(np.flatnonzero(~arriving)), snapshots, AT)
    touched = tuple(sorted({evidence.agents[a] for a in evidence.agent[arriving]}))
    log = Log(evidence, snapshots)
    state.update(*log.rows_of(touched), AT, touched)
    for at in (AT + 3 * HOUR, AT + 9 * MICROS_PER_DAY):
        refreshed = state.refresh(at, log.rows_of)
        assert columns_digest(refreshed) == columns_digest(score_columns(evidence, snapshots, weights, at))


def test_an_empty_state_rates_nobody() -> None:
    state = RatingState(load_weights(ROOT / "weights" / "baseline-v0.3.toml"))
    assert state.refresh(AT, lambda names: pytest.fail("no rows to read")).agents == ()


def test_agents_added_after_a_refresh_come_out_in_order() -> None:
    evidence, snapshots = rich_evidence()
    weights = load_weights(ROOT / "weights" / "baseline-v0.3.toml")
    state = RatingState(weights)
    log = Log(evidence, snapshots)
    names = sorted(set(evidence.agents) | set(snapshots.agents))
    state.update(*log.rows_of(tuple(names[1::2])), AT, names[1::2])
    state.refresh(AT, log.rows_of)
    state.update(*log.rows_of(tuple(names[::2])), AT, names[::2])
    refreshed = state.refresh(AT + HOUR, log.rows_of)
    assert len(state) == len(names)
    assert columns_digest(refreshed) == columns_digest(score_columns(evidence, snapshots, weights, AT + HOUR))


@pytest.mark.parametrize("model", MODELS)
@pytest.mark.parametrize("seed", [1, 2])
def test_refresh_at_the_edges_of_windows(model: str, seed: int) -> None:
    # Times exactly at a row's time (it counts from then), one microsecond before, and random jumps
    # forward and back: the window bounds are where an off-by-one would show.
    evidence, snapshots = rich_evidence(rows=800, agents=40, seed=seed)
    weights = load_weights(ROOT / "weights" / f"{model}.toml")
    rng = np.random.default_rng(seed)
    edges = rng.choice(np.concatenate((evidence.at, snapshots.at)), 6)
    times = [int(t) + d for t in edges for d in (-1, 0, 1)]
    times += [int(t) for t in AT + rng.integers(-40, 40, 6) * MICROS_PER_DAY]
    state = RatingState(weights)
    state.update(evidence, snapshots, int(times[-1]))
    log = Log(evidence, snapshots)
    for at in times:
        refreshed = state.refresh(at, log.rows_of)
        assert columns_digest(refreshed) == columns_digest(score_columns(evidence, snapshots, weights, at)), (
            at
        )


@pytest.mark.parametrize("model", ["trustscore-v1", "trustscore-v2"])
def test_a_decay_model_refreshes_from_its_kept_rows_and_orders(model: str) -> None:
    # No row becomes due between these times: the kept counted rows serve, the second time with the
    # orders of the first (sums_near_order), and nothing more is read from the log.
    state, log = started(model)
    for at in (AT + 1, AT + 2, AT + 3, AT + 100_000_000):  # the first row due is ~349 s after AT
        checks(at, state, log)
    assert len(log.asked) == 1  # the first refresh after update() reads every agent's rows, once


@pytest.mark.parametrize("model", MODELS)
def test_a_dropped_agent_leaves_the_refresh_and_the_others_are_unchanged(model: str) -> None:
    """The service drops an agent a model comes to refuse (services/ratings.py, _each_agent): every
    later refresh is the full recompute over the other agents, bit for bit."""
    state, log = started(model)
    state.refresh(TIMES[0], log.rows_of)  # a decay model now keeps its counted rows and orders
    names = sorted(set(log.evidence.agents) | set(log.snapshots.agents))
    gone = names[1::3]
    state.drop([*gone, "ts1_not_rated"])
    assert len(state) == len(names) - len(gone)
    for at in TIMES:
        full = score_columns(
            log.evidence, log.snapshots, state.weights, at, [n for n in names if n not in gone]
        )
        assert columns_digest(state.refresh(at, log.rows_of)) == columns_digest(full), at
