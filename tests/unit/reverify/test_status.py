"""Status rules: verified iff the latest run matched; security upgrades at once and downgrades only after
three consistent runs; identical consecutive results are not re-recorded."""

from __future__ import annotations

import datetime as dt
from typing import Any

import msgspec
import pytest

from tests.unit.reverify.kit import item, matching, payload, private, statement
from trustscore.errors import InvalidInput, VerificationError
from trustscore.kinds.reverification import Reverification, security
from trustscore.kinds.reverification.security import DOWNGRADE_RUNS, SecurityState
from trustscore.ledger import statements
from trustscore.reverify import status
from trustscore.reverify.evidence import derive_reverification


def test_upgrade_on_one_run_downgrade_after_three_consistent_runs() -> None:
    assert DOWNGRADE_RUNS == 3
    s = security.step(SecurityState(), "pass")
    assert s == SecurityState("passed", 0)
    s = security.step(s, "fail")
    assert s == SecurityState("passed", 1)  # one noisy run lowers nothing
    s = security.step(s, "none")
    assert s == SecurityState("passed", 1)  # a run without probes neither breaks nor extends the streak
    s = security.step(s, "fail")
    assert s == SecurityState("passed", 2)
    s = security.step(s, "fail")
    assert s == SecurityState("failed", 0)
    assert security.step(s, "pass") == SecurityState("passed", 0)  # upgrades at once


def test_a_pass_resets_the_downgrade_streak() -> None:
    s = SecurityState()
    for observed in ("pass", "fail", "fail", "pass", "fail", "fail"):
        s = security.step(s, observed)
    assert s == SecurityState("passed", 2)


def test_unverified_also_needs_three_failures_to_become_failed() -> None:
    s = SecurityState()
    for _ in range(2):
        s = security.step(s, "fail")
    assert s.status == "unverified"
    assert security.step(s, "fail") == SecurityState("failed", 0)


def test_observe() -> None:
    assert security.observe([]) == "none"
    assert security.observe([1000, 500]) == "pass"
    assert security.observe([1000, 250]) == "fail"


@pytest.mark.parametrize(
    ("observed", "status_", "streak"),
    [
        ("pass", "passed", 1),
        ("pass", "unverified", 0),
        ("fail", "failed", 1),
        ("fail", "passed", 0),
        ("none", "failed", 2),
    ],
)
def test_inconsistent_security_fields_are_refused(observed: str, status_: str, streak: int) -> None:
    with pytest.raises(InvalidInput):
        security.check_consistent(observed, status_, streak)  # type: ignore[arg-type]


def test_verified_only_while_the_latest_run_matched() -> None:
    match, mismatch = statement(), statement(items=matching(observed=0))
    down = statement(items=[item("i-0", 1000, None)])
    assert status.verified([match])
    assert not status.verified([match, mismatch])  # removed at once
    assert not status.verified([match, down])  # a down endpoint is not a pass
    assert status.verified([mismatch, match])
    assert not status.verified([])


def test_summary_and_history() -> None:
    history = [statement(items=matching(observed=0), ran_at=f"2026-03-0{n}T00:00:00Z") for n in (1,)]
    history += [statement(ran_at=f"2026-03-0{n}T00:00:00Z") for n in (2, 3)]
    summary = status.summarize(list(zip([10, 20, 30], history, strict=True)), **NOW)
    assert summary.verified and summary.verified_since == "2026-03-02T00:00:00Z"
    assert summary.latest_index == 30
    assert [(r.index, r.outcome) for r in summary.history] == [(10, "mismatch"), (20, "match"), (30, "match")]
    assert msgspec.json.decode(msgspec.json.encode(summary), type=status.VerificationStatus) == summary
    empty = status.summarize([], **NOW)
    assert (empty.verified, empty.verified_since, empty.security_status) == (False, None, "unverified")


def test_identical_consecutive_results_are_not_re_recorded() -> None:
    first = statement()
    again = statement(
        checkpoint_size=9, checkpoint_root=b"\x09" * 32, trigger="schedule", ran_at="2026-03-02T00:00:00Z"
    )
    assert first.nonce != again.nonce and first.seed != again.seed
    assert status.should_record(None, first)
    assert not status.should_record(first, again)
    assert status.should_record(first, statement(items=matching(observed=0)))
    assert status.should_record(first, statement(endpoint="https://elsewhere.example/"))
    assert status.should_record(first, statement(report_index=6, checkpoint_size=8))
    assert status.should_record(first, statement(private_items=[private("p-1", 1000, "capability")]))


def test_a_streak_towards_a_downgrade_is_always_recorded() -> None:
    before = SecurityState("passed", 0)
    probes = [private("p-1", 0)]
    one = statement(private_items=probes, before=before)
    two = statement(private_items=probes, before=SecurityState(one.security_status, one.security_streak))
    assert (one.security_streak, two.security_streak) == (1, 2)
    assert status.should_record(one, two)


def test_unreachable_runs_with_different_samples_are_identical() -> None:
    a = statement(items=[item("i-0", 1000, None), item("i-1", 0, None)])
    b = statement(items=[item("i-7", 500, None)], checkpoint_size=9, trigger="schedule")
    assert not status.should_record(a, b)


def _chain(*observations: list[int]) -> list[Reverification]:
    out: list[Reverification] = []
    for grades in observations:
        before = status.security_state(out)
        out.append(
            statement(private_items=[private(f"p-{n}", g) for n, g in enumerate(grades)], before=before)
        )
    return out


def test_check_history_recomputes_the_security_chain() -> None:
    chain = _chain([1000], [0], [0], [0])
    assert status.check_history(chain) == SecurityState("failed", 0)
    assert status.security_state(chain) == SecurityState("failed", 0)
    # a statement that skips the streak (downgrading on one run) is consistent alone but not in the chain
    forged = statement(private_items=[private("p-0", 0)], before=SecurityState("passed", 2))
    with pytest.raises(VerificationError, match=r"run 1 .* should be passed/1"):
        status.check_history([chain[0], forged])


NOW: dict[str, Any] = {
    "endpoint": "https://agent.example/ask",
    "now": dt.datetime(2026, 3, 4, tzinfo=dt.UTC),
    "interval_s": 86_400.0,
}


def _status(history: list[Any], **kw: Any) -> status.VerificationStatus:
    return status.summarize(list(enumerate(history)), **{**NOW, **kw})


def test_verified_means_now_an_endpoint_is_declared() -> None:
    """Issue #10: an agent that removed its endpoint with a card update stayed verified forever."""
    ok = _status([statement(ran_at="2026-03-03T12:00:00Z")])
    assert ok.verified and ok.lapsed is None
    gone = _status([statement(ran_at="2026-03-03T12:00:00Z")], endpoint=None)
    assert not gone.verified and gone.lapsed == "no_endpoint"


def test_verified_lapses_after_two_intervals() -> None:
    run = [statement(ran_at="2026-03-01T12:00:00Z")]  # 2.5 days before NOW
    assert _status(run).lapsed == "stale" and not _status(run).verified
    assert _status(run, interval_s=2 * 86_400.0).verified  # within 2 x 2 days
    assert _status(run, interval_s=0).verified  # no schedule: runs only follow reports
    assert (
        _status([statement(items=matching(observed=0), ran_at="2026-03-03T12:00:00Z")]).lapsed == "mismatch"
    )


def test_a_public_private_gap_is_a_mismatch_and_costs_integrity() -> None:
    """Issue #10: perfect public answers and failed private ones kept an agent verified (capability ~74)."""
    failing = [private(f"p-{n}", 0, "capability") for n in range(3)]
    gap = statement(private_items=failing, ran_at="2026-03-03T12:00:00Z")
    assert status.private_gap(gap) == 1000
    summary = _status([gap])
    assert not summary.verified and summary.lapsed == "private_gap"
    passing = [private(f"p-{n}", 1000, "capability") for n in range(3)]
    assert _status([statement(private_items=passing, ran_at="2026-03-03T12:00:00Z")]).verified
    [_, strike, *_] = derive_reverification(7, statements.parse_statement(payload(private_items=failing)))
    assert (strike.key, strike.value, strike.result) == (
        "reverify:private-gap:capability@1",
        0.0,
        "failure",
    )


def test_silence_on_every_private_item_is_a_private_gap() -> None:
    """review-integrity: a lookup agent answers the public items it has read and stays silent on anything
    else; with no private item answered the gap was None, so it stayed verified and lost no integrity."""
    silent = [private(f"p-{n}", None, "capability") for n in range(3)]
    run = statement(private_items=silent, ran_at="2026-03-03T12:00:00Z")
    assert status.private_gap(run) == 1000
    summary = _status([run])
    assert not summary.verified and summary.lapsed == "private_gap"
    [_, strike, *_] = derive_reverification(7, statements.parse_statement(payload(private_items=silent)))
    assert (strike.key, strike.value, strike.result) == (
        "reverify:private-gap:capability@1",
        0.0,
        "failure",
    )


def test_private_items_never_asked_are_not_a_gap() -> None:
    """Items the run never asked (its deadline passed) say nothing about the agent: no gap from them."""
    unasked = [
        msgspec.structs.replace(
            private(f"p-{n}", None, "capability"), error="not asked: the run's deadline passed"
        )
        for n in range(3)
    ]
    run = statement(private_items=unasked, ran_at="2026-03-03T12:00:00Z")
    assert status.private_gap(run) is None
    assert _status([run]).verified


def test_a_new_endpoint_is_not_verified_by_runs_of_the_old_one() -> None:
    """review-integrity: an agent verified at one endpoint swapped its card to another (a cheaper model)
    and stayed verified for two intervals without a single run against the new endpoint."""
    run = [statement(ran_at="2026-03-03T12:00:00Z")]  # asked https://agent.example/ask
    assert _status(run).verified
    swapped = _status(run, endpoint="https://cheap.example/ask")
    assert not swapped.verified and swapped.lapsed == "stale"


def _every_run_since(history: list[tuple[int, Reverification]]) -> str | None:
    """verified_since read off every run, newest first (what the status computed before it kept a digest)."""
    since = None
    for _, r in reversed(history):
        if r.outcome != "match":
            break
        since = r.ran_at
    return since


def _runs(outcomes: str) -> list[tuple[int, Reverification]]:
    """One statement per letter (m: match, x: mismatch), a day apart, at log indexes 3, 6, 9, ..."""
    out = []
    for n, o in enumerate(outcomes):
        ran_at = (dt.datetime(2026, 1, 1, tzinfo=dt.UTC) + dt.timedelta(days=n)).strftime(
            "%Y-%m-%dT%H:%M:%SZ"
        )
        out.append((3 * (n + 1), statement(items=matching(observed=1000 if o == "m" else 0), ran_at=ran_at)))
    return out


def test_a_status_shows_the_newest_runs_and_counts_them_all() -> None:
    """An agent's runs grow by one a day: a status of every run grew without bound in every rating
    response, agent page and leaderboard row. It shows the newest HISTORY_SHOWN; verified_since still
    reads back past them (a series of matches longer than the rows shown)."""
    history = _runs("x" + "m" * (status.HISTORY_SHOWN + 9))
    summary = status.summarize(history, **{**NOW, "now": dt.datetime(2026, 2, 1, tzinfo=dt.UTC)})
    assert summary.runs == status.HISTORY_SHOWN + 10
    assert [row.index for row in summary.history] == [i for i, _ in history[-status.HISTORY_SHOWN :]]
    assert summary.verified_since == history[1][1].ran_at  # the second run, not among the rows shown
    assert summary.verified and summary.latest_index == history[-1][0]
    assert msgspec.json.decode(msgspec.json.encode(summary), type=status.VerificationStatus) == summary


@pytest.mark.parametrize("seed", range(20))
def test_folding_runs_in_batches_is_folding_them_at_once(seed: int) -> None:
    """A kept digest carried over the runs logged since gives the status of every run."""
    import random

    rng = random.Random(seed)
    history = _runs("".join(rng.choice("mmmx") for _ in range(rng.randrange(0, 60))))
    at_once = status.fold(status.Digest(), history)
    digest, start = status.Digest(), 0
    while start < len(history):
        end = start + rng.randrange(0, 8)
        digest = status.fold(digest, history[start:end])
        start = end
    assert digest == at_once
    assert at_once.runs == len(history) and at_once.since == _every_run_since(history)
    assert [r.index for r in at_once.recent] == [i for i, _ in history][-status.HISTORY_SHOWN :]
    assert at_once.last is (history[-1][1] if history else None)


def test_a_run_is_folded_once_in_log_order() -> None:
    history = _runs("mmm")
    digest = status.fold(status.Digest(), history)
    with pytest.raises(ValueError, match="log order"):
        status.fold(digest, history[-1:])  # the same run again
    with pytest.raises(ValueError, match="log order"):
        status.fold(status.Digest(), list(reversed(history)))
