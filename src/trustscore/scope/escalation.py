"""The escalation chain of the source document's alert configuration, as a status with history. Pure: the
clock is an argument (docs/scope-honesty.md, "Escalation").

Read after each weekly run (the latest run of each ISO-aligned week), in order:

- ``cancelled``: every weekly SHS has been below 60 for at least 30 days (since the first run of the
  unbroken streak), judged after each weekly run, and by time alone on the weekly series as it stood
  between one run and the next (:func:`cancelled_between`) and at ``now``; terminal.
- ``suspended``: SHS < 60 in this weekly run (the document's pact terms: "below 60 in any single
  evaluation: suspended immediately"; its chain: "Suspension (SHS drops below 60)"), or the last two weekly
  runs both critical (SHS < 60 or FT < 50: the alert configuration's ``consecutiveWeeksForSuspension: 2``,
  which so reads on FT).
- ``review``: SHS < 70 in the last two weekly runs (the pact terms: "below 70 for two consecutive weekly
  evaluations: pact enters review status").
- ``warning``: SHS < 70, or DA < 75, FT < 60, BA < 65, or FT < 50 in a single run.
- ``soft_alert``: SHS fell by 5 or more points, or by more than 10 % (a scope drift alert), or any of
  DA/FT/BA by 8 or more, since the previous week; or SHS fell in each of the last three weeks (the drift
  engine's "3-week declining trend", an escalated alert).
- ``ok`` otherwise. ``human_review`` is set whenever SHS < 65.

Changed 2026-12-08 (a conformance review against the source document): one weekly SHS below 60 was a
warning, two were needed to suspend; ``review``, the 10 % drift alert and the declining trend were not read.
"""

from __future__ import annotations

import bisect
import datetime as dt
import itertools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

Status = Literal["ok", "soft_alert", "warning", "review", "suspended", "cancelled"]

WEEK_OVER_WEEK_SHS_DROP = 5.0
ANY_DIMENSION_DROP = 8.0
SHS_WARNING, DA_WARNING, FT_WARNING, BA_WARNING = 70.0, 75.0, 60.0, 65.0
SHS_CRITICAL, FT_CRITICAL = 60.0, 50.0
CONSECUTIVE_WEEKS_FOR_SUSPENSION = 2
CONSECUTIVE_WEEKS_FOR_REVIEW = 2
DRIFT_SHARE = 0.10  # a weekly SHS drop of more than this share of the week before: scope drift
DECLINING_WEEKS = 3  # weekly SHS falling in each of this many weeks: an escalated alert
PACT_MINIMUM = 80.0  # "SHS minimum: 80 for continued pact validity"
CANCEL_AFTER = dt.timedelta(days=30)
HUMAN_REVIEW_BELOW = 65.0
CANCEL_REASON = "SHS below 60 for 30 days"


@dataclass(frozen=True)
class WeeklyScore:
    index: int  # the log index of the run's sitting-close
    at: dt.datetime
    shs: float
    da: float
    ft: float
    ba: float


@dataclass(frozen=True)
class StatusChange:
    index: int | None  # the run that caused it (None: time passing)
    at: dt.datetime
    status: Status
    reasons: list[str] = field(default_factory=list)


def _critical(w: WeeklyScore) -> bool:
    return w.shs < SHS_CRITICAL or w.ft < FT_CRITICAL


def _status_after(weeks: list[WeeklyScore]) -> tuple[Status, list[str]]:
    w = weeks[-1]
    prev = weeks[-2] if len(weeks) > 1 else None
    if w.shs < SHS_CRITICAL:
        return "suspended", [f"SHS {w.shs:g} < {SHS_CRITICAL:g} in a single evaluation"]
    tail = weeks[-CONSECUTIVE_WEEKS_FOR_SUSPENSION:]
    if len(tail) == CONSECUTIVE_WEEKS_FOR_SUSPENSION and all(_critical(x) for x in tail):
        return "suspended", [f"critical (SHS < {SHS_CRITICAL:g} or FT < {FT_CRITICAL:g}) for "
                             f"{CONSECUTIVE_WEEKS_FOR_SUSPENSION} consecutive weeks"]  # fmt: skip
    tail = weeks[-CONSECUTIVE_WEEKS_FOR_REVIEW:]
    if len(tail) == CONSECUTIVE_WEEKS_FOR_REVIEW and all(x.shs < SHS_WARNING for x in tail):
        return "review", [f"SHS < {SHS_WARNING:g} for {CONSECUTIVE_WEEKS_FOR_REVIEW} consecutive weeks"]
    reasons = [
        text
        for cond, text in (
            (_critical(w), f"critical this week (FT < {FT_CRITICAL:g})"),
            (w.shs < SHS_WARNING, f"SHS {w.shs:g} < {SHS_WARNING:g}"),
            (w.da < DA_WARNING, f"DA {w.da:g} < {DA_WARNING:g}"),
            (w.ft < FT_WARNING, f"FT {w.ft:g} < {FT_WARNING:g}"),
            (w.ba < BA_WARNING, f"BA {w.ba:g} < {BA_WARNING:g}"),
        )
        if cond
    ]
    if reasons:
        return "warning", reasons
    if prev is not None:
        drops = [
            (n, a - b) for n, a, b in (("DA", prev.da, w.da), ("FT", prev.ft, w.ft), ("BA", prev.ba, w.ba))
        ]
        soft = [f"{n} fell {d:g} points in a week" for n, d in drops if d >= ANY_DIMENSION_DROP]
        if prev.shs - w.shs > DRIFT_SHARE * prev.shs:
            soft.insert(0, f"scope drift: SHS fell {(prev.shs - w.shs) / prev.shs:.1%} in a week")
        if prev.shs - w.shs >= WEEK_OVER_WEEK_SHS_DROP:
            soft.insert(0, f"SHS fell {prev.shs - w.shs:.2f} points in a week")
        last = weeks[-DECLINING_WEEKS - 1 :]
        if len(last) > DECLINING_WEEKS and all(a.shs > b.shs for a, b in itertools.pairwise(last)):
            soft.append(f"SHS fell in each of the last {DECLINING_WEEKS} weeks (escalated alert)")
        if soft:
            return "soft_alert", soft
    return "ok", []


#: Statuses under which no pact is valid, whatever the latest SHS.
NOT_VALID: tuple[Status, ...] = ("review", "suspended", "cancelled")


def pact_valid(weeks: list[WeeklyScore], current: Status) -> bool | None:
    """Whether the latest weekly SHS meets the document's minimum for continued pact validity (80) and
    the status ``current`` leaves a pact standing (not review, suspended or cancelled: a cancelled pact
    stays cancelled whatever a later run scores); None without a weekly score."""
    if not weeks:
        return None
    return weeks[-1].shs >= PACT_MINIMUM and current not in NOT_VALID


def _cancelled(weeks: list[WeeklyScore], at: dt.datetime) -> bool:
    return weeks[-1].shs < SHS_CRITICAL and at - _streak_start(weeks) >= CANCEL_AFTER


def history(
    weeks: list[WeeklyScore], now: dt.datetime, between: StatusChange | None = None
) -> list[StatusChange]:
    """Every change of status: after each weekly run, and by time alone (``between``:
    :func:`cancelled_between`; and at ``now``)."""
    return at_time(weeks, run_changes(weeks), now, between)


def cancelled_between(runs: Sequence[tuple[int, WeeklyScore]]) -> StatusChange | None:
    """The first cancellation before the last run, judged on the weekly series as it stood: ``runs`` are
    every scored run, in log order, with its week. After each run the series is what it then was (the
    latest run of each week so far) until the next run; if its last week is below 60 and the streak has
    lasted 30 days before the next run, it was cancelled then: by time alone (``index`` None) or, when the
    30 days had passed already, by that run (a run later replaced in its week, which the weekly chain of
    :func:`run_changes` never reads).

    Judged on the series as it stood then, not as later runs made it: a later run replaces its own week's
    score, so reading today's series a good run after a cancellation undid it (found by review,
    2026-12-07), and reading the series at the next run cancelled an agent that had recovered in time,
    its good run replaced in its week by a later one (a first fix, withdrawn). A cancellation after the
    last run is :func:`at_time`'s (it depends on the time read at)."""
    by_week: dict[int, WeeklyScore] = {}
    order: list[int] = []  # the weeks with a run so far, in order
    latest: dt.datetime | None = None
    for p, (week, score) in enumerate(runs[:-1]):
        if week not in by_week:
            bisect.insort(order, week)
        by_week[week] = score
        latest = score.at if latest is None else max(latest, score.at)
        if by_week[order[-1]].shs >= SHS_CRITICAL:
            continue
        start = by_week[order[-1]].at
        for w in reversed(order):  # back over the streak, no further than 30 days before this run
            earlier = by_week[w]
            if earlier.shs >= SHS_CRITICAL:
                break
            start = earlier.at
            if start + CANCEL_AFTER <= latest:
                break
        reached = start + CANCEL_AFTER
        if reached <= latest:  # this run found the streak 30 days long
            return StatusChange(score.index, latest, "cancelled", [CANCEL_REASON])
        if reached < runs[p + 1][1].at:  # (a run at that very time is read first)
            return StatusChange(None, reached, "cancelled", [CANCEL_REASON])
    return None


def run_changes(weeks: list[WeeklyScore]) -> list[StatusChange]:
    """The changes of status after each weekly run (:func:`history` without the time now)."""
    out: list[StatusChange] = []
    current: Status = "ok"
    for k, w in enumerate(weeks):
        if current == "cancelled":
            break
        status: Status
        if _cancelled(weeks[: k + 1], w.at):
            status, reasons = "cancelled", [CANCEL_REASON]
        else:
            status, reasons = _status_after(weeks[: k + 1])
        if status != current or (reasons and out and out[-1].reasons != reasons):
            out.append(StatusChange(w.index, w.at, status, reasons))
        current = status
    return out


def at_time(
    weeks: list[WeeklyScore],
    changes: list[StatusChange],
    now: dt.datetime,
    between: StatusChange | None = None,
) -> list[StatusChange]:
    """:func:`history` from the changes after the runs (:func:`run_changes`): a cancellation before the
    last run (``between``, :func:`cancelled_between`) or by ``now`` added, and nothing after it
    (terminal)."""
    if between is not None and between.at <= now:
        kept = [c for c in changes if c.at < between.at]
        if kept and kept[-1].status == "cancelled":  # a weekly run cancelled before
            return kept
        return [*kept, between]
    current = changes[-1].status if changes else "ok"
    if weeks and current != "cancelled" and _cancelled(weeks, now):
        cancelled = StatusChange(None, _streak_start(weeks) + CANCEL_AFTER, "cancelled", [CANCEL_REASON])
        return [*changes, cancelled]
    return changes


def _streak_start(weeks: list[WeeklyScore]) -> dt.datetime:
    start = weeks[-1].at
    for w in reversed(weeks):
        if w.shs >= SHS_CRITICAL:
            break
        start = w.at
    return start


def status(
    weeks: list[WeeklyScore], now: dt.datetime, between: StatusChange | None = None
) -> tuple[Status, list[str], bool]:
    """The status at ``now``, its reasons, and whether human review is required (SHS < 65)."""
    return status_of(weeks, history(weeks, now, between))


def status_of(weeks: list[WeeklyScore], changes: list[StatusChange]) -> tuple[Status, list[str], bool]:
    """:func:`status` from the :func:`history` at the time it was read at."""
    if not changes:
        return "ok", [], bool(weeks) and weeks[-1].shs < HUMAN_REVIEW_BELOW
    last = changes[-1]
    return last.status, list(last.reasons), bool(weeks) and weeks[-1].shs < HUMAN_REVIEW_BELOW
