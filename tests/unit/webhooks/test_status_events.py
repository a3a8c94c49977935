"""The two status events of #15 derived purely: ``verified.changed`` from re-verification statements and
``scope.status_changed`` from scope runs. A change emits one event with a stable id, no change emits none."""

from __future__ import annotations

import datetime as dt

from tests.unit.reverify import kit
from tests.unit.scope.test_report import T0, run
from trustscore.kinds.reverification import Reverification
from trustscore.reverify.status import standing
from trustscore.scope.report import escalation_after
from trustscore.scope.runs import Run
from trustscore.webhooks import events
from trustscore.webhooks.events import WebhookEvent

A = "ts1_" + "a" * 40
AT = dt.datetime(2026, 3, 1, 12, tzinfo=dt.UTC)
EP = "https://agent.example/ask"
RUN = {"outcome": "match", "matched_millis": 1000, "report_index": 5}


def verified_events(
    index: int, earlier: list[Reverification], new: Reverification, endpoint: str | None
) -> list[WebhookEvent]:
    before = standing(earlier, endpoint)
    after = standing([*earlier, new], endpoint)
    return events.verified_changed(index, A, AT, before, after, RUN)


def test_a_first_matching_run_gains_verified() -> None:
    [e] = verified_events(9, [], kit.statement(), EP)
    assert e.type == "verified.changed" and e.agent == A and e.index == 9
    assert e.data["verified"] is True and e.data["change"] == "gained"
    assert e.data["reason"] is None and e.data["previous_reason"] is None
    again = verified_events(9, [], kit.statement(), EP)[0]
    assert again.id == e.id and again.body == e.body
    assert verified_events(10, [], kit.statement(), EP)[0].id != e.id


def test_a_mismatch_loses_verified_with_its_reason() -> None:
    down = kit.statement(items=[kit.item(f"i-{n}", 1000, None) for n in range(10)])
    [e] = verified_events(12, [kit.statement()], down, EP)
    assert e.data["verified"] is False and e.data["change"] == "lost"
    assert e.data["reason"] == "mismatch"


def test_no_change_emits_nothing() -> None:
    down = kit.statement(items=[kit.item(f"i-{n}", 1000, None) for n in range(10)])
    assert verified_events(12, [kit.statement()], kit.statement(), EP) == []  # still verified
    assert verified_events(12, [down], down, EP) == []  # still not
    assert verified_events(12, [], down, EP) == []  # never was
    assert verified_events(12, [], kit.statement(), None) == []  # no endpoint declared: never verified


def test_a_run_of_the_newly_declared_endpoint_regains_verified() -> None:
    """The card in force moved to another endpoint: the old run no longer speaks for it (stale)."""
    new = kit.statement(endpoint="https://new.example/ask")
    [e] = verified_events(20, [kit.statement()], new, "https://new.example/ask")
    assert e.data["change"] == "gained" and e.data["previous_reason"] == "stale"


def test_standing_ignores_the_clock() -> None:
    """Time passing is no log entry: a run years old stands as it did (the API's ``stale`` is not an event)."""
    old = kit.statement(ran_at="2000-01-01T00:00:00Z")
    assert standing([old], EP) == (True, None)


def scope_events(index: int, runs: list[Run]) -> list[WebhookEvent]:
    before, _, _ = escalation_after(runs[:-1])
    after, reasons, week = escalation_after(runs)
    scores = None if week is None else {"shs": week.shs, "da": week.da, "ft": week.ft, "ba": week.ba}
    return events.scope_status_changed(index, A, AT, before, after, reasons, scores)


def test_shs_below_60_suspends_at_once_and_ft_below_50_warns_then_suspends() -> None:
    good = run(T0, 10, 4, 5)
    bad1 = run(T0 + dt.timedelta(weeks=1), 0, 0, 0)  # SHS 10: suspended in a single evaluation
    [s] = scope_events(1, [good, bad1])
    assert s.type == "scope.status_changed"
    assert (s.data["from"], s.data["to"]) == ("ok", "suspended")
    assert s.data["reasons"] and s.data["scores_hundredths"]["da"] == 0
    assert isinstance(s.data["scores_hundredths"]["shs"], int)
    silent = [run(T0 + dt.timedelta(weeks=k), 10, 0, 5) for k in (1, 2)]  # FT 0, SHS over 60
    [w] = scope_events(1, [good, silent[0]])
    assert (w.data["from"], w.data["to"]) == ("ok", "warning")
    [t] = scope_events(2, [good, *silent])
    assert (t.data["from"], t.data["to"]) == ("warning", "suspended")
    assert t.id != w.id and scope_events(2, [good, *silent])[0].id == t.id
    assert b'"to":"suspended"' in t.body and b'"to":"warning"' in w.body  # canonical JSON: no float


def test_an_unchanged_status_emits_nothing() -> None:
    good = [run(T0 + dt.timedelta(weeks=k), 10, 4, 5) for k in range(3)]
    assert scope_events(0, good[:1]) == []  # ok from ok
    assert scope_events(2, good) == []
    bad = [run(T0 + dt.timedelta(weeks=k), 10, 0, 5) for k in range(2)]  # FT 0: critical each week
    assert [e.data["to"] for e in scope_events(0, bad[:1])] == ["warning"]
    assert [e.data["to"] for e in scope_events(1, bad)] == ["suspended"]
