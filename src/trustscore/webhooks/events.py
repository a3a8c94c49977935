"""Webhook events derived from log entries, purely (docs/webhooks.md).

Each event names its cause: its id is a digest of (log index, type, agent, model), so deriving the same
log twice gives the same ids and a redelivery is recognisable. Its time is the cause's own (issued_at,
taken_at), never the server's clock, so events are a pure function of the log.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

import msgspec

from trustscore import canonical
from trustscore.kinds.cards import AgentCard
from trustscore.kinds.events import Event
from trustscore.kinds.settlements import Settlement
from trustscore.kinds.snapshots import RatingSnapshot
from trustscore.kinds.subscriptions import Subscription
from trustscore.ledger.statements import format_time, parse_time

NEGATIVE_EVENTS = frozenset({"rejected", "delivery_failed", "negotiation_expired", "signature_invalid"})
#: What of a card a ``card.changed`` event reports (issue #15: endpoint, declared model version,
#: declared capabilities).
CARD_FIELDS = ("endpoint", "model", "model_version", "capabilities")

#: The grade a model gives a total, or None when the model is not served.
GradeOf = Callable[[str, int], str | None]


@dataclass(frozen=True)
class WebhookEvent:
    """One event: ``body`` is the exact JSON delivered (Standard Webhooks payload shape) and shown in feeds."""

    id: str
    index: int
    type: str
    agent: str
    at: dt.datetime
    data: dict[str, Any] = field(default_factory=dict)

    @property
    def body(self) -> bytes:
        return canonical.encode(
            {"type": self.type, "timestamp": format_time(self.at), "data": {"id": self.id, **self.data}}
        )

    @property
    def delta(self) -> int | None:
        """For ``rating.changed``: the change in total points, None when one side has no rating."""
        old, new = self.data.get("old_total"), self.data.get("new_total")
        return None if old is None or new is None else int(new) - int(old)


def event_id(index: int, type_: str, agent: str, extra: str = "") -> str:
    """The stable id of the event of ``type_`` about ``agent`` caused by log entry ``index``."""
    cause = f"{index}\n{type_}\n{agent}\n{extra}".encode()
    return "evt_" + hashlib.sha256(cause).hexdigest()[:32]


def _event(
    index: int, type_: str, agent: str, at: dt.datetime, data: dict[str, Any], extra: str = ""
) -> WebhookEvent:
    return WebhookEvent(
        event_id(index, type_, agent, extra),
        index,
        type_,
        agent,
        at,
        {"agent": agent, "log_index": index, **data},
    )


def card_changed(index: int, new: AgentCard, old: AgentCard | None, agent: str) -> list[WebhookEvent]:
    """``card.changed`` when a later card of the agent changes what it declares (none for a first card)."""
    if old is None:
        return []
    before, after = msgspec.to_builtins(old), msgspec.to_builtins(new)
    changed = {
        f: {"old": before.get(f), "new": after.get(f)} for f in CARD_FIELDS if before.get(f) != after.get(f)
    }
    if not changed:
        return []
    return [
        _event(
            index, "card.changed", agent, parse_time(new.issued_at, what="issued_at"), {"changes": changed}
        )
    ]


def negative_settlement(index: int, s: Settlement) -> list[WebhookEvent]:
    """``settlement.negative`` about the seller for a late or failed delivery, about the buyer for a
    failed payment."""
    at = parse_time(s.settled_at, what="settled_at")
    out = []
    if s.delivery in ("late", "fail"):
        out.append(
            _event(
                index,
                "settlement.negative",
                s.seller,
                at,
                {"deal_id": s.deal_id, "delivery": s.delivery, "reporter_role": s.reporter_role},
            )
        )
    if s.payment == "fail":
        out.append(
            _event(
                index,
                "settlement.negative",
                s.buyer,
                at,
                {"deal_id": s.deal_id, "payment": s.payment, "reporter_role": s.reporter_role},
            )
        )
    return out


def negative_event(index: int, e: Event) -> list[WebhookEvent]:
    """``event.negative`` for a marketplace event that counts against the agent."""
    if e.event not in NEGATIVE_EVENTS:
        return []
    at = parse_time(e.occurred_at, what="occurred_at")
    return [
        _event(
            index,
            "event.negative",
            e.agent,
            at,
            {"event": e.event, "marketplace": e.marketplace, "ref": e.ref},
        )
    ]


def rating_changes(
    index: int, snap: RatingSnapshot, previous: Mapping[str, int | None], grade_of: GradeOf
) -> list[WebhookEvent]:
    """``rating.changed`` and ``grade.changed`` between each agent's previous snapshot under the same
    model (``previous``: agent -> total; absent: never snapshotted) and this one."""
    at = parse_time(snap.taken_at, what="taken_at")
    out = []
    for row in snap.ratings:
        if row.agent not in previous:
            old: int | None = None
        else:
            old = previous[row.agent]
        if old == row.total:
            continue
        model = snap.model_version
        common = {"model_version": model, "old_total": old, "new_total": row.total}
        out.append(_event(index, "rating.changed", row.agent, at, common, model))
        old_grade = None if old is None else grade_of(model, old)
        new_grade = None if row.total is None else grade_of(model, row.total)
        if old_grade != new_grade:
            grades = {"model_version": model, "old_grade": old_grade, "new_grade": new_grade}
            out.append(_event(index, "grade.changed", row.agent, at, grades, model))
    return out


def verified_changed(
    index: int,
    agent: str,
    at: dt.datetime,
    before: tuple[bool, str | None],
    after: tuple[bool, str | None],
    run: Mapping[str, Any],
) -> list[WebhookEvent]:
    """``verified.changed`` when the re-verification statement at ``index`` moves the agent between
    verified and not verified; ``before``/``after`` are (verified, lapse reason) just before and right
    after it (reverify/status.py ``standing``), ``run`` what the run found (outcome, matched_millis,
    report_index). Nothing when the status stays (a second lapse reason is no change of status)."""
    if before[0] == after[0]:
        return []
    data = {
        "verified": after[0],
        "change": "gained" if after[0] else "lost",
        "reason": after[1],
        "previous_reason": before[1],
        **run,
    }
    return [_event(index, "verified.changed", agent, at, data)]


def _hundredths(value: float) -> int:
    """A score as an integer number of hundredths of a point (signed payloads carry no floats)."""
    return round(value * 100)


def scope_status_changed(
    index: int,
    agent: str,
    at: dt.datetime,
    before: str,
    after: str,
    reasons: list[str],
    scores: Mapping[str, float] | None,
) -> list[WebhookEvent]:
    """``scope.status_changed`` when the scope run closed at ``index`` moves the agent's escalation status
    (``ok``, ``soft_alert``, ``warning``, ``review``, ``suspended``, ``cancelled``) from ``before`` to ``after``;
    ``reasons`` are the new status's and ``scores`` (shs, da, ft, ba in points) the weekly run it read."""
    if before == after:
        return []
    data: dict[str, Any] = {"from": before, "to": after, "reasons": list(reasons)}
    if scores is not None:
        data["scores_hundredths"] = {k: _hundredths(v) for k, v in sorted(scores.items())}
    return [_event(index, "scope.status_changed", agent, at, data)]


def wants(sub: Subscription, event: WebhookEvent) -> bool:
    """Whether ``sub`` asked for ``event``: its type, its agent (or every agent), its threshold."""
    if sub.agents and event.agent not in sub.agents:
        return False
    return wants_change(sub.events, sub.threshold, event)


def wants_change(types: Collection[str], threshold: int, event: WebhookEvent) -> bool:
    """Whether a subscription to ``types`` with ``threshold`` wants ``event`` (its agent aside)."""
    if event.type not in types:
        return False
    if event.type == "rating.changed" and threshold > 0:
        delta = event.delta
        return delta is None or abs(delta) >= threshold
    return True
