"""`trustscore agent show` counts every recorded re-verification run, not the newest ones a status shows."""

from __future__ import annotations

from typing import Any

from trustscore.cli.agent import agent_lines


def _agent(verification: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "ts1_a",
        "kind": "agent",
        "name": "A",
        "endpoint": None,
        "controller": None,
        "card_index": 3,
        "verification": verification,
    }


def test_every_run_is_counted() -> None:
    rows = [{"index": i} for i in range(20)]
    shown = agent_lines(_agent({"verified": True, "history": rows, "runs": 31}))
    assert "re-verification: verified, 31 run(s)" in shown
    older = agent_lines(
        _agent({"verified": False, "lapsed": None, "history": rows[:2]})
    )  # a server before `runs`
    assert "re-verification: not verified (never run), 2 run(s)" in older
