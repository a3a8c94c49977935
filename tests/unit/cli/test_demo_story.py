"""The demo waits for what it shows: a re-verification run of every report, not only of the latest."""

from __future__ import annotations

from typing import Any

from trustscore.cli.demo_story import covers


def status(*report_indexes: int) -> dict[str, Any]:
    return {"history": [{"report_index": i, "outcome": "mismatch"} for i in report_indexes]}


def test_a_run_of_the_latest_report_alone_does_not_cover_an_earlier_one_being_retried() -> None:
    # Report 10's first attempt failed and is retried after 12's run: until it is recorded, the rating
    # lacks what it found.
    assert not covers(status(8, 12), {8, 10, 12})


def test_every_report_run_covers_them_in_any_order() -> None:
    assert covers(status(8, 12, 10), {8, 10, 12})


def test_runs_of_reports_not_waited_for_do_not_matter() -> None:
    assert covers(status(3, 8, 10, 12), {8, 10, 12})
    assert not covers(status(), {8})
