"""``score_columns(..., threads=k)``: contiguous runs of agents rated in threads give every released model's
pinned columns bit for bit, for any number of runs, a given list of agents, agents with snapshots only,
and raise the serial path's errors."""

from __future__ import annotations

import datetime as dt
import hashlib
import warnings

import msgspec
import numpy as np
import pytest

from trustscore.errors import InvalidInput
from trustscore.scoring import load_weights
from trustscore.scoring.engine import score_columns
from trustscore.scoring.inputs import EvidenceBatch, EvidenceItem, SnapshotBatch
from trustscore.scoring.ratings import to_ratings
from trustscore.scoring.times import MICROS_PER_DAY

from .conftest import ROOT
from .test_scoring_pinned import AT, CASES, PINNED, columns_digest, rich_evidence


@pytest.mark.parametrize(("model", "days"), CASES)
@pytest.mark.parametrize("threads", [2, 3, 7])
def test_runs_in_threads_give_the_pinned_outputs(model: str, days: int, threads: int) -> None:
    evidence, snapshots = rich_evidence()
    weights = load_weights(ROOT / "weights" / f"{model}.toml")
    columns = score_columns(evidence, snapshots, weights, AT + days * MICROS_PER_DAY, threads=threads)
    ratings = msgspec.json.encode(to_ratings(columns, weights))
    assert (columns_digest(columns), hashlib.sha256(ratings).hexdigest()) == PINNED[(model, days)]


@pytest.mark.parametrize("model", ["baseline-v0.3", "trustscore-v1", "trustscore-v2", "trustscore-v3"])
def test_a_given_list_of_agents_and_more_threads_than_agents(model: str) -> None:
    evidence, snapshots = rich_evidence()
    weights = load_weights(ROOT / "weights" / f"{model}.toml")
    # Out of order, repeated, one agent unknown to both batches, two with snapshots only.
    agents = ["agent-0200", "snap-only-3", "nobody", "agent-0001", "agent-0200", "snap-only-0", "agent-0100"]
    serial = score_columns(evidence, snapshots, weights, AT, agents)
    for threads in (2, 5, 40):
        assert columns_digest(score_columns(evidence, snapshots, weights, AT, agents, threads=threads)) == (
            columns_digest(serial)
        )
    assert score_columns(evidence, snapshots, weights, AT, [], threads=4).agents == ()


def test_an_error_in_any_run_is_raised() -> None:
    evidence, snapshots = rich_evidence()
    weights = load_weights(ROOT / "weights" / "baseline-v0.3.toml")
    # A copy of the last keyed row of the last agent with keyed rows: two rows share agent, key, time
    # and seq, and only the last run (of 2 or 3) sees them.
    keyed = np.flatnonzero(evidence.key >= 0)
    last_agent = evidence.agent[keyed].max()
    assert last_agent >= len(evidence.agents) * 2 // 3
    first = keyed[evidence.agent[keyed] == last_agent][-1]
    broken = evidence.take(np.append(np.arange(len(evidence)), first))
    with pytest.raises(InvalidInput, match="seq must break ties"):
        score_columns(broken, snapshots, weights, AT)
    with pytest.raises(InvalidInput, match="seq must break ties"):
        score_columns(broken, snapshots, weights, AT, threads=3)


def _item(agent: str, at: dt.datetime, key: str | None = None) -> EvidenceItem:
    return EvidenceItem(agent=agent, dimension="capability", source="real", at=at, value=0.5, key=key)


OUT_OF_RANGE = (dt.datetime(1920, 1, 1, tzinfo=dt.UTC), dt.datetime(1930, 6, 1, tzinfo=dt.UTC))


@pytest.mark.parametrize(
    ("items", "seq"),
    [
        # Found by review: two agents out of trustscore-v3's range, the later agent's row first: one
        # thread names row 0's time, two threads named the earlier run's (row 1's).
        ([_item("zed", OUT_OF_RANGE[0]), _item("amy", OUT_OF_RANGE[1])], None),
        # One thread finds the key tie (selecting rows) before the range; two threads raised the range.
        (
            [
                _item("amy", OUT_OF_RANGE[0]),
                _item("zed", dt.datetime(2026, 6, 1, tzinfo=dt.UTC), key="k"),
                _item("zed", dt.datetime(2026, 6, 1, tzinfo=dt.UTC), key="k"),
            ],
            [0, 1, 1],
        ),
    ],
)
def test_several_bad_agents_give_the_one_thread_error(
    items: list[EvidenceItem], seq: list[int] | None
) -> None:
    weights = load_weights(ROOT / "weights" / "trustscore-v3.toml")
    evidence = EvidenceBatch.from_items(items, seq=seq)
    with pytest.raises(InvalidInput) as serial:
        score_columns(evidence, SnapshotBatch.empty(), weights, AT)
    for threads in (2, 3):
        with pytest.raises(InvalidInput) as threaded:
            score_columns(evidence, SnapshotBatch.empty(), weights, AT, threads=threads)
        assert str(threaded.value) == str(serial.value)


@pytest.mark.parametrize("setting", ["raise", "warn"])
def test_the_callers_numpy_error_settings_reach_the_threads(setting: str) -> None:
    """Found by review: numpy keeps errstate in a context variable and a pool's threads start from an empty
    context, so an underflow (freshness 10^5 days on) raised or warned in one thread and not in two."""
    evidence, snapshots = rich_evidence(rows=600, agents=40)
    weights = load_weights(ROOT / "weights" / "baseline-v0.3.toml")
    later = AT + 100_000 * MICROS_PER_DAY
    outcomes = []
    for threads in (1, 2):
        with warnings.catch_warnings(record=True) as caught, np.errstate(all=setting):  # type: ignore[arg-type]
            warnings.simplefilter("always")
            try:
                score_columns(evidence, snapshots, weights, later, threads=threads)
                outcomes.append(sorted({str(w.message) for w in caught}))
            except FloatingPointError as exc:
                outcomes.append([f"raised {exc}"])
    assert outcomes[0] and outcomes[1] == outcomes[0]


@pytest.mark.parametrize("threads", [0, -1, 2.5, "2", True])
def test_threads_must_be_a_positive_whole_number(threads: object) -> None:
    evidence, snapshots = rich_evidence(rows=50, agents=5)
    weights = load_weights(ROOT / "weights" / "baseline-v0.3.toml")
    with pytest.raises(InvalidInput, match="threads"):
        score_columns(evidence, snapshots, weights, AT, threads=threads)  # type: ignore[arg-type]


def test_threads_beyond_the_agents_start_no_more_runs() -> None:
    """threads=10**7 once spent 0.4 s building split points; runs never outnumber the agents."""
    evidence, snapshots = rich_evidence(rows=50, agents=5)
    weights = load_weights(ROOT / "weights" / "baseline-v0.3.toml")
    serial = columns_digest(score_columns(evidence, snapshots, weights, AT))
    assert columns_digest(score_columns(evidence, snapshots, weights, AT, threads=10**9)) == serial
