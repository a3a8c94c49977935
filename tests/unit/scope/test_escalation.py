"""The escalation chain, driven by a clock the test controls (issue #12)."""

from __future__ import annotations

import datetime as dt
import random

import pytest

from trustscore.scope.escalation import WeeklyScore, cancelled_between, history, pact_valid, status
from trustscore.scope.report import week_of

T0 = dt.datetime(2026, 1, 5, 12, tzinfo=dt.UTC)  # a Monday


def week(n: int, shs: float, da: float = 100, ft: float = 100, ba: float = 100) -> WeeklyScore:
    return WeeklyScore(index=100 + n, at=T0 + dt.timedelta(weeks=n), shs=shs, da=da, ft=ft, ba=ba)


def test_ok_then_soft_alert_on_a_five_point_drop() -> None:
    weeks = [week(0, 95), week(1, 94)]
    assert status(weeks, T0 + dt.timedelta(weeks=1))[0] == "ok"
    weeks.append(week(2, 89, da=90))
    s, reasons, review = status(weeks, T0 + dt.timedelta(weeks=2))
    assert s == "soft_alert" and "SHS fell 5.00 points in a week" in reasons and not review


def test_soft_alert_on_an_eight_point_drop_in_one_dimension() -> None:
    weeks = [week(0, 95, ba=100), week(1, 93.4, ba=92)]
    s, reasons, _ = status(weeks, T0 + dt.timedelta(weeks=1))
    assert s == "soft_alert" and reasons == ["BA fell 8 points in a week"]


def test_warning_below_70_or_a_dimension_threshold() -> None:
    assert status([week(0, 69.9)], T0)[0] == "warning"
    assert status([week(0, 85, da=74)], T0)[1] == ["DA 74 < 75"]
    assert status([week(0, 85, ft=59)], T0)[1] == ["FT 59 < 60"]
    assert status([week(0, 85, ba=64)], T0)[1] == ["BA 64 < 65"]
    assert status([week(0, 70, da=75, ft=60, ba=65)], T0)[0] == "ok"  # every threshold is strict


def test_shs_below_60_once_suspends_ft_below_50_twice() -> None:
    """The document's pact terms: "If SHS drops below 60 in any single evaluation: Pact suspended
    immediately" (and its chain: "Suspension (SHS drops below 60)"); its alert configuration's
    ``consecutiveWeeksForSuspension: 2`` then reads on FT < 50, its other critical threshold."""
    weeks = [week(0, 90), week(1, 59)]
    s, reasons, review = status(weeks, T0 + dt.timedelta(weeks=1))
    assert s == "suspended" and reasons == ["SHS 59 < 60 in a single evaluation"] and review
    assert status([week(0, 60)], T0)[0] == "warning"  # 60 is not below 60
    one = status([week(0, 75, ft=49)], T0)
    assert one[0] == "warning" and one[1][0] == "critical this week (FT < 50)"
    assert status([week(0, 75, ft=49), week(1, 75, ft=40)], T0 + dt.timedelta(weeks=1))[0] == "suspended"


def test_two_weeks_below_70_is_review() -> None:
    """The pact terms: "If SHS drops below 70 for two consecutive weekly evaluations: Pact enters review
    status" (one week below 70 is a warning, as the chain says)."""
    assert status([week(0, 69)], T0)[0] == "warning"
    s, reasons, _ = status([week(0, 69), week(1, 68)], T0 + dt.timedelta(weeks=1))
    assert (s, reasons) == ("review", ["SHS < 70 for 2 consecutive weeks"])
    assert status([week(0, 69), week(1, 70)], T0 + dt.timedelta(weeks=1))[0] == "ok"


def test_drift_and_a_declining_trend_alert() -> None:
    """A weekly drop of more than 10 % is a scope drift alert; SHS falling in each of the last three
    weeks is an escalated alert (the drift engine's "3-week declining trend")."""
    s, reasons, _ = status([week(0, 100), week(1, 89.9)], T0 + dt.timedelta(weeks=1))
    assert s == "soft_alert" and "scope drift: SHS fell 10.1% in a week" in reasons
    assert "scope drift" not in " ".join(status([week(0, 100), week(1, 90)], T0 + dt.timedelta(weeks=1))[1])
    falling = [week(0, 99), week(1, 98), week(2, 97), week(3, 96)]
    s, reasons, _ = status(falling, T0 + dt.timedelta(weeks=3))
    assert (s, reasons) == ("soft_alert", ["SHS fell in each of the last 3 weeks (escalated alert)"])
    assert status(falling[1:], T0 + dt.timedelta(weeks=3))[0] == "ok"  # two weekly falls are not three


def test_pact_validity_needs_80_and_a_standing_status() -> None:
    assert pact_valid([week(0, 80)], "ok") is True and pact_valid([week(0, 79.99)], "warning") is False
    assert pact_valid([], "ok") is None
    # review: a cancelled pact stays cancelled whatever a later run scores (review of 2026-12-08)
    weeks = [week(0, 90), *(week(n, 50) for n in range(1, 7)), week(7, 95)]
    assert status(weeks, weeks[-1].at)[0] == "cancelled"
    assert pact_valid(weeks, "cancelled") is False and pact_valid(weeks[:1], "suspended") is False


def test_cancelled_after_30_days_below_60_by_the_clock_alone() -> None:
    weeks = [week(0, 90), week(1, 55), week(2, 50)]
    start = weeks[1].at
    assert status(weeks, start + dt.timedelta(days=29, hours=23))[0] == "suspended"
    s, _, review = status(weeks, start + dt.timedelta(days=30))
    assert s == "cancelled" and review
    changes = history(weeks, start + dt.timedelta(days=31))
    assert [c.status for c in changes] == ["suspended", "suspended", "cancelled"]  # each week names its SHS
    assert changes[-1].index is None and changes[-1].at == start + dt.timedelta(days=30)


def test_cancelled_is_terminal_and_recovery_before_it_resets() -> None:
    weeks = [week(n, 50) for n in range(6)]  # 5 weeks below 60: cancelled at week 5 (35 days)
    assert status(weeks, weeks[-1].at)[0] == "cancelled"
    assert status([*weeks, week(6, 99)], weeks[-1].at + dt.timedelta(weeks=1))[0] == "cancelled"
    recovered = [week(0, 50), week(1, 50), week(2, 95), week(3, 96)]
    assert status(recovered, T0 + dt.timedelta(days=60))[0] == "ok"


def test_human_review_below_65() -> None:
    assert status([week(0, 64.99)], T0)[2] is True
    assert status([week(0, 65)], T0)[2] is False
    assert status([], T0) == ("ok", [], False)


def _first_cancellation_by_definition(
    runs: list[WeeklyScore], end: dt.datetime
) -> tuple[dt.datetime, int | None] | None:
    """The first moment at which the weekly series as it then stood (the last logged run of each week
    among the runs logged by then) had been below 60 for 30 days: the document's rule, read literally in
    log order — after each run is logged, at its time, then hour by hour until the next run's time (a run
    logged at the same time as the one before is read after it). With the run that made it so, if the
    moment is a run's."""
    for p in range(1, len(runs) + 1):
        by_week = {week_of(r.at): r for r in runs[:p]}
        series = [by_week[w] for w in sorted(by_week)]
        t, stop = runs[p - 1].at, runs[p].at if p < len(runs) else end + dt.timedelta(hours=1)
        while True:
            if series[-1].shs < 60:
                start = series[-1].at
                for w in reversed(series):
                    if w.shs >= 60:
                        break
                    start = w.at
                if t - start >= dt.timedelta(days=30):
                    return t, (runs[p - 1].index if t == runs[p - 1].at else None)
            t += dt.timedelta(hours=1)
            if t >= stop:
                break
    return None


@pytest.mark.parametrize("seed", range(300))
def test_the_first_cancellation_is_the_documents_on_the_series_as_it_stood(seed: int) -> None:
    """Runs at random hours (several at one instant, several in a week or none for weeks), above and below
    60: the chain cancels when, and only when, the series as it stood at some moment had been below 60 for
    30 days, at that moment and by the run that made it so — whatever later runs did to their weeks (a
    later good run undid a cancellation; a run later replaced in its week was never read)."""
    rng = random.Random(seed)
    runs: list[WeeklyScore] = []
    at = T0
    for k in range(rng.randint(1, 14)):
        at += dt.timedelta(hours=rng.choice([0, 1, 20, 50, 100, 170, 300, 500, 800]))
        runs.append(
            WeeklyScore(index=k, at=at, shs=rng.choice([40.0, 55.0, 65.0, 90.0]), da=100, ft=100, ba=100)
        )
    end = at + dt.timedelta(days=40)
    expected = _first_cancellation_by_definition(runs, end)
    by_week = {week_of(r.at): r for r in runs}
    weeks = [by_week[w] for w in sorted(by_week)]
    between = cancelled_between([(week_of(r.at), r) for r in runs])
    changes = history(weeks, end, between)
    cancelled = [(c.at, c.index) for c in changes if c.status == "cancelled"]
    assert cancelled == ([] if expected is None else [expected]), (runs, changes)
    assert not cancelled or changes[-1].status == "cancelled"  # terminal: nothing after it
