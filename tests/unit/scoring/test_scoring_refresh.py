"""The incremental refresh (scoring/refresh.py) gives the full recompute bit for bit, at every time."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from trustscore.scoring import EvidenceBatch, SnapshotBatch, load_weights
from trustscore.scoring.engine import score_columns
from trustscore.scoring.inputs import EvidenceBuilder
from trustscore.scoring.kernels import I64
from trustscore.scoring.medals import find_medal_rules, real_items
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


@pytest.mark.parametrize("model", MODELS)
def test_an_update_of_nobody_on_a_new_state_changes_nothing(model: str) -> None:
    """update() with no agents (empty batches, or an empty ``agents``) raised KeyError on a state that
    had never stored an agent: its columns are made by the first store of one."""
    evidence, snapshots = rich_evidence()
    state = RatingState(load_weights(ROOT / "weights" / f"{model}.toml"))
    state.update(EvidenceBuilder().build(), SnapshotBatch.empty(), AT)
    state.update(evidence, snapshots, AT, ())
    assert len(state) == 0
    state.update(evidence, snapshots, AT)
    checks(AT + HOUR, state, Log(evidence, snapshots))


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


def reencoded(evidence: EvidenceBatch, rng: np.random.Generator) -> EvidenceBatch:
    """``evidence`` in reverse row order, with its agent, source, issuer and key codes renumbered by
    random permutations (as another batch built by ``from_items`` in another order would number them):
    the codes carry no meaning beyond equality, so kept rows from one batch and spliced rows from
    another must rate as one batch."""

    def permuted(table: tuple[str, ...]) -> tuple[tuple[str, ...], I64]:
        new = rng.permutation(len(table)).astype(np.int64)  # old code -> new code
        out = [""] * len(table)
        for old, code in enumerate(new.tolist()):
            out[code] = table[old]
        return tuple(out), np.concatenate((new, [-1]))  # -1 (none) stays -1

    agents, agent_code = permuted(evidence.agents)
    sources, source_code = permuted(evidence.sources)
    issuers, issuer_code = permuted(evidence.issuers)
    width = int(evidence.key.max()) + 1 if len(evidence) else 0
    key_code = np.concatenate((rng.permutation(width).astype(np.int64), [-1]))
    rows = np.arange(len(evidence), dtype=np.int64)[::-1]
    batch = evidence.take(rows)
    return dataclasses.replace(
        batch,
        agents=agents,
        sources=sources,
        issuers=issuers,
        agent=agent_code[batch.agent],
        source=source_code[batch.source],
        issuer=issuer_code[batch.issuer],
        key=key_code[batch.key],
    )


class GrowingLog:
    """A log whose rows arrive in ``seq`` order, read back by ``rows_of`` as freshly encoded batches."""

    def __init__(self, evidence: EvidenceBatch, snapshots: SnapshotBatch, seed: int) -> None:
        self.all_evidence, self.all_snapshots = evidence, snapshots
        self.evidence_order = np.argsort(evidence.seq, kind="stable")
        self.n_evidence = self.n_snapshots = 0
        self.rng = np.random.default_rng(seed)

    @property
    def evidence(self) -> EvidenceBatch:
        return self.all_evidence.take(np.sort(self.evidence_order[: self.n_evidence]))

    @property
    def snapshots(self) -> SnapshotBatch:
        return self.all_snapshots.take(np.arange(self.n_snapshots, dtype=np.int64))

    def arrive(self, n_evidence: int, n_snapshots: int) -> set[str]:
        """The next rows arrive; return the agents they touch."""
        ev = self.evidence_order[self.n_evidence : self.n_evidence + n_evidence]
        self.n_evidence = min(self.n_evidence + n_evidence, len(self.all_evidence))
        snaps = np.arange(self.n_snapshots, min(self.n_snapshots + n_snapshots, len(self.all_snapshots)))
        self.n_snapshots += snaps.size
        touched = {self.all_evidence.agents[a] for a in self.all_evidence.agent[ev].tolist()}
        return touched | {self.all_snapshots.agents[a] for a in self.all_snapshots.agent[snaps].tolist()}

    def rows_of(self, names: tuple[str, ...]) -> tuple[EvidenceBatch, SnapshotBatch]:
        evidence, snapshots = self.evidence, self.snapshots
        wanted = np.isin(np.array(evidence.agents), names)[evidence.agent]
        wanted_snaps = np.isin(np.array(snapshots.agents), names)[snapshots.agent]
        return (
            reencoded(evidence.take(np.flatnonzero(wanted)), self.rng),
            snapshots.take(np.flatnonzero(wanted_snaps)),
        )


STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("arrive"), st.integers(0, 60), st.integers(0, 40)),
        st.tuples(st.just("refresh"), st.integers(-5 * 24, 12 * 24), st.just(0)),
        st.tuples(st.just("drop"), st.integers(0, 10**6), st.integers(1, 4)),
        st.tuples(st.just("readd"), st.integers(0, 10**6), st.integers(1, 4)),
    ),
    min_size=1,
    max_size=12,
)


@pytest.mark.parametrize("model", MODELS)
@given(steps=STEPS, seed=st.integers(0, 2**16), start=st.integers(0, 300))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
def test_any_interleaving_of_arrivals_drops_and_refreshes_is_the_full_recompute(
    model: str, steps: list[tuple[str, int, int]], seed: int, start: int
) -> None:
    """Arrivals (update of the agents they touch, at the current time), drops, re-added agents and
    refreshes forward and back, in any order, with every batch the state reads encoded afresh: each
    refresh is score_columns over every rated agent's rows in the log, bit for bit (the kept counted
    rows of trustscore-v1/v2 are spliced, the issuer cap of v1 reading issuer codes of many batches),
    and the kept medal counts are real_items over the log."""
    evidence, snapshots = rich_evidence(rows=500, agents=30, seed=seed % 7 + 1)
    weights = load_weights(ROOT / "weights" / f"{model}.toml")
    medals = find_medal_rules(ROOT / "weights", weights)
    log = GrowingLog(evidence, snapshots, seed)
    state = RatingState(weights, medals)
    rated = sorted(log.arrive(start, start // 3))
    now = AT
    state.update(*log.rows_of(tuple(rated)), now, rated)
    known = set(rated)
    rated_set = set(rated)
    for op, a, b in steps:
        if op == "arrive":
            touched = sorted(log.arrive(a, b))
            known |= set(touched)
            if touched:
                state.update(*log.rows_of(tuple(touched)), now, touched)
                rated_set |= set(touched)
        elif op == "refresh":
            now = AT + a * HOUR + a  # hours forward or back, off the hour
        elif op in ("drop", "readd") and known:
            pool = sorted(rated_set if op == "drop" else known - rated_set) or sorted(known)
            chosen = [pool[(a + i * 7) % len(pool)] for i in range(b)]
            if op == "drop":
                state.drop(chosen)
                rated_set -= set(chosen)
            else:
                state.update(*log.rows_of(tuple(sorted(set(chosen)))), now, chosen)
                rated_set |= set(chosen)
        if not rated_set:
            continue
        full = score_columns(log.evidence, log.snapshots, weights, now, sorted(rated_set))
        assert columns_digest(state.refresh(now, log.rows_of)) == columns_digest(full), (op, a, b)
        if medals is not None:  # the kept medal counts too (re-read only with an agent's rows)
            expected = real_items(log.evidence, sorted(rated_set), medals, now)
            for kept, want in zip(state.medal_counts(), expected, strict=True):
                np.testing.assert_array_equal(kept, want)
