"""An agent's verification status and its history, purely from its re-verification statements.

Verified means now (issue #10): the agent's current card declares an endpoint, the latest run matched,
its private answers are not far below its public ones (:data:`PRIVATE_GAP_MILLIS`), and that run is at
most :data:`STALE_INTERVALS` re-verification intervals old. Otherwise the status lapses with a reason:
``no_endpoint``, ``mismatch``, ``private_gap`` or ``stale`` (checked in that order; a latest run that
asked another endpoint than the card declares now is ``stale`` first). A mismatch (or an
unreachable endpoint) removes the status at once.
The security status is carried by each statement (:mod:`trustscore.kinds.reverification.security`); :func:`check_history`
recomputes that chain. :func:`should_record` keeps identical consecutive results out of the log.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any, Literal

import msgspec

from trustscore.errors import VerificationError
from trustscore.kinds.reverification import Reverification, security, security_probes
from trustscore.kinds.reverification.compare import Outcome
from trustscore.kinds.reverification.security import SecurityState, SecurityStatus
from trustscore.ledger.statements import parse_time

#: A matching run keeps an agent verified for this many re-verification intervals.
STALE_INTERVALS = 2
#: Public answers may score at most this much (millis) above private ones before it is a mismatch.
PRIVATE_GAP_MILLIS = 400

#: How the runner's error begins for an item it never asked (run deadline, unreachable endpoint).
NOT_ASKED = "not asked:"

LapseReason = Literal["no_endpoint", "stale", "mismatch", "private_gap"]


def private_gap(r: Reverification) -> int | None:
    """Mean observed public grade minus mean private grade (millis), or None when the endpoint answered
    no public item (a down endpoint is a mismatch already) or the run asked no private item.

    A private item asked and not answered is 0: an agent that answers the public items it has read and
    stays silent on everything else has a gap, not an excuse. Items the run never asked (its deadline
    passed, error ``not asked: ...``) are left out."""
    if all(i.observed_millis is None for i in r.items):
        return None
    asked = [p for p in r.private_items if not (p.error or "").startswith(NOT_ASKED)]
    if not asked:
        return None
    public = sum(i.observed_millis or 0 for i in r.items) / len(r.items)
    private = sum(p.value_millis or 0 for p in asked) / len(asked)
    return round(public - private)


def gap_exceeded(r: Reverification) -> bool:
    gap = private_gap(r)
    return gap is not None and gap > PRIVATE_GAP_MILLIS


class HistoryRow(msgspec.Struct, frozen=True, kw_only=True):
    index: int  # log index of the re-verification statement
    ran_at: str
    report_index: int
    outcome: Outcome
    matched_millis: int
    security_status: SecurityStatus


class VerificationStatus(msgspec.Struct, frozen=True, kw_only=True):
    """What the rating response shows: the status now and every recorded run, oldest first."""

    verified: bool
    verified_since: str | None  # ran_at of the first run of the current unbroken series of matches
    latest_index: int | None
    security_status: SecurityStatus
    history: list[HistoryRow]
    lapsed: LapseReason | None = None  # why the agent is not verified now (None: verified, or never run)


def security_state(history: Sequence[Reverification]) -> SecurityState:
    """The standing security state after ``history`` (an agent's statements in log order)."""
    if not history:
        return SecurityState()
    last = history[-1]
    return SecurityState(last.security_status, last.security_streak)


def verified(history: Sequence[Reverification]) -> bool:
    return bool(history) and history[-1].outcome == "match"


def check_history(history: Sequence[Reverification]) -> SecurityState:
    """Recompute the security chain of an agent's statements (log order); raise at the first that breaks it."""
    state = SecurityState()
    for n, r in enumerate(history):
        if r.security_observed != security.observe(security_probes(r.items, r.private_items)):
            raise VerificationError(f"run {n} of {r.agent}: security_observed contradicts its probes")
        state = security.step(state, r.security_observed)
        if (r.security_status, r.security_streak) != (state.status, state.streak):
            raise VerificationError(
                f"run {n} of {r.agent}: security status {r.security_status}/{r.security_streak} should be "
                f"{state.status}/{state.streak} after the runs before it"
            )
    return state


def _result(r: Reverification) -> tuple[Any, ...]:
    """What a run found, without when, how it was seeded, or which items went unanswered."""
    answered = tuple(
        (i.item_id, i.observed_millis, i.matched) for i in r.items if i.observed_millis is not None
    )
    private = tuple(
        (p.exam, p.item_id, p.value_millis, p.result) for p in r.private_items if p.value_millis is not None
    )
    return (
        r.agent,
        r.report_index,
        r.report_sha256,
        r.endpoint,
        r.outcome,
        r.matched_millis,
        answered,
        private,
        r.security_observed,
        r.security_status,
        r.security_streak,
    )


def should_record(previous: Reverification | None, new: Reverification) -> bool:
    """False when ``new`` would say exactly what the agent's previous recorded run said."""
    return previous is None or _result(previous) != _result(new)


def lapse(
    statements: Sequence[Reverification], endpoint: str | None, now: dt.datetime, interval_s: float
) -> LapseReason | None:
    """Why the agent is not verified now, or None when it is (or was never asked)."""
    if endpoint is None:
        return "no_endpoint"
    if not statements:
        return None
    last = statements[-1]
    if last.endpoint != endpoint:  # runs of another endpoint say nothing about the one declared now
        return "stale"
    if last.outcome != "match":
        return "mismatch"
    if gap_exceeded(last):
        return "private_gap"
    ran = parse_time(last.ran_at, what="ran_at")
    if interval_s > 0 and now - ran > dt.timedelta(seconds=STALE_INTERVALS * interval_s):
        return "stale"
    return None


def summarize(
    history: Sequence[tuple[int, Reverification]],
    *,
    endpoint: str | None,
    now: dt.datetime,
    interval_s: float,
) -> VerificationStatus:
    """The status and history of one agent from its (log index, statement) pairs in log order, given the
    endpoint its current card declares, the time now and the re-verification interval (seconds; 0 runs
    only after reports, and then a run never goes stale)."""
    rows = [
        HistoryRow(
            index=i,
            ran_at=r.ran_at,
            report_index=r.report_index,
            outcome=r.outcome,
            matched_millis=r.matched_millis,
            security_status=r.security_status,
        )
        for i, r in history
    ]
    since: str | None = None
    for row in reversed(rows):
        if row.outcome != "match":
            break
        since = row.ran_at
    statements = [r for _, r in history]
    why = lapse(statements, endpoint, now, interval_s)
    return VerificationStatus(
        verified=verified(statements) and why is None,
        lapsed=why,
        verified_since=since,
        latest_index=rows[-1].index if rows else None,
        security_status=security_state(statements).status,
        history=rows,
    )


def standing(statements: Sequence[Reverification], endpoint: str | None) -> tuple[bool, LapseReason | None]:
    """Whether the agent is verified right after its last statement and, if not, why, judged by the log
    alone: ``endpoint`` is the one its card in force declares, and time passing is not counted (a run
    going stale is no log entry), so the answer is the same wherever and whenever it is computed. What
    the ``verified.changed`` webhook event compares before and after each re-verification statement."""
    why = lapse(statements, endpoint, dt.datetime.min.replace(tzinfo=dt.UTC), 0)
    return verified(statements) and why is None, why
