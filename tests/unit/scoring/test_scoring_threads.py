"""``score_columns(..., threads=k)``: contiguous runs of agents rated in threads give every released model's
pinned columns bit for bit, for any number of runs, a given list of agents, agents with snapshots only,
and raise the serial path's errors."""

from __future__ import annotations

import hashlib

import msgspec
import numpy as np
import pytest

from trustscore.errors import InvalidInput
from trustscore.scoring import load_weights
from trustscore.scoring.engine import score_columns
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
