"""An agent's verification status and its history, purely from its re-verification statements.

Verified means now (issue #10): the agent's current card declares an endpoint, the latest run matched,
its private answers are not far below its public ones (:data:`PRIVATE_GAP_MILLIS`), and that run is at
most :data:`STALE_INTERVALS` re-verification intervals old. Otherwise the status lapses with a reason:
``no_endpoint``, ``mismatch``, ``private_gap`` or ``stale`` (checked in that order; a latest run that
asked another endpoint than the card declares now is ``stale`` first). A mismatch (or an
unreachable endpoint) removes the status at once.
The security status is carried by each statement (:mod:`trustscore.kinds.reverification.security`); :func:`check_history`
recomputes that chain. :func:`should_record` keeps identical consecutive results out of the log.

A status shows the newest :data:`HISTORY_SHOWN` runs and counts them all: an agent's runs grow by one a
day, so a status of every run grew without bound, and so did the rating responses and pages showing it.
Everything a status reads of the runs is a :class:`Digest`, which :func:`fold` carries forward over the
runs logged since (:mod:`trustscore.services.reverify` keeps one per agent and reads only newer runs).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
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

#: Recorded runs a status shows, the newest ones (``runs`` counts them all; the log holds every one).
HISTORY_SHOWN = 20

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
    """What the rating response shows: the status now and the newest recorded runs, oldest first."""

    verified: bool
    verified_since: str | None  # ran_at of the first run of the current unbroken series of matches
    latest_index: int | None
    security_status: SecurityStatus
    history: list[HistoryRow]  # the newest HISTORY_SHOWN recorded runs, oldest first
    runs: int  # every recorded run
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


@dataclass(frozen=True)
class Digest:
    """What a status reads of an agent's recorded runs up to the one logged at ``last_index`` (-1: none):
    how many there are, when the current series of matches began, the newest rows, the last statement."""

    last_index: int = -1
    runs: int = 0
    since: str | None = None
    recent: tuple[HistoryRow, ...] = ()
    last: Reverification | None = None


def fold(digest: Digest, later: Sequence[tuple[int, Reverification]]) -> Digest:
    """``digest`` carried over ``later``: (log index, statement) of the agent's runs logged after
    ``digest.last_index``, in log order. Folding runs one batch at a time gives what folding them all at
    once gives."""
    runs, since, last_index, last = digest.runs, digest.since, digest.last_index, digest.last
    recent = list(digest.recent)
    for index, r in later:
        if index <= last_index:
            raise ValueError(f"run at {index} is not after {last_index}: runs are folded in log order, once")
        recent.append(
            HistoryRow(
                index=index,
                ran_at=r.ran_at,
                report_index=r.report_index,
                outcome=r.outcome,
                matched_millis=r.matched_millis,
                security_status=r.security_status,
            )
        )
        if r.outcome != "match":
            since = None
        elif since is None:  # a new series of matches begins
            since = r.ran_at
        runs, last_index, last = runs + 1, index, r
    return Digest(last_index, runs, since, tuple(recent[-HISTORY_SHOWN:]), last)


def summarize(
    history: Sequence[tuple[int, Reverification]],
    *,
    endpoint: str | None,
    now: dt.datetime,
    interval_s: float,
) -> VerificationStatus:
    """The status of one agent from its (log index, statement) pairs in log order (:func:`status_of`)."""
    return status_of(fold(Digest(), history), endpoint=endpoint, now=now, interval_s=interval_s)


def status_of(
    digest: Digest, *, endpoint: str | None, now: dt.datetime, interval_s: float
) -> VerificationStatus:
    """The status and newest runs of one agent from the :class:`Digest` of its runs, given the endpoint its
    current card declares, the time now and the re-verification interval (seconds; 0 runs only after
    reports, and then a run never goes stale)."""
    statements = [] if digest.last is None else [digest.last]  # what is said now rests on the last run
    why = lapse(statements, endpoint, now, interval_s)
    return VerificationStatus(
        verified=verified(statements) and why is None,
        lapsed=why,
        verified_since=digest.since,
        latest_index=digest.recent[-1].index if digest.recent else None,
        security_status=security_state(statements).status,
        history=list(digest.recent),
        runs=digest.runs,
    )


def standing(statements: Sequence[Reverification], endpoint: str | None) -> tuple[bool, LapseReason | None]:
    """Whether the agent is verified right after its last statement and, if not, why, judged by the log
    alone: ``endpoint`` is the one its card in force declares, and time passing is not counted (a run
    going stale is no log entry), so the answer is the same wherever and whenever it is computed. What
    the ``verified.changed`` webhook event compares before and after each re-verification statement."""
    why = lapse(statements, endpoint, dt.datetime.min.replace(tzinfo=dt.UTC), 0)
    return verified(statements) and why is None, why
