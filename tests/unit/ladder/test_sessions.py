"""Harness import (issue #13) on Claude Code JSONL transcripts written for these tests."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from trustscore.cli.main import main
from trustscore.ladder.rule import RULE_0, RULE_1
from trustscore.ladder.sessions import ClaudeCode, Session

HERE = Path(__file__).parent / "transcripts"


def parse(name: str) -> Session:
    [s] = ClaudeCode().parse(name, (HERE / name).read_bytes())
    return s


def test_green_session_edits_passes_and_commits() -> None:
    s = parse("green.jsonl")
    assert (s.model, s.claimed_outcome, s.finished_at) == (
        "claude-opus-4-20250514",
        "done",
        "2026-11-20T10:00:40.000Z",
    )
    assert [(r.kind, r.command, r.exit_code) for r in s.runs] == [("test", "cargo test", 0)]
    assert [c.commit for c in s.commits] == ["3f9a2b1"] and len(s.artifacts) == 1
    assert s.rung(RULE_1).name == "commit_observed"


def test_a_failed_run_never_reaches_rung_3() -> None:
    s = parse("red.jsonl")
    assert [r.exit_code for r in s.runs] == [101] and s.skipped_lines == 1
    r = s.rung(RULE_1)
    assert (r.name, r.summary) == ("artifact_changed", "every test or build run failed")
    assert s.rung(RULE_0).name == "test_or_build_passed"  # the withdrawn rule, from the command alone


def test_a_run_whose_result_was_never_captured_is_result_unknown() -> None:
    s = parse("lost.jsonl")
    assert [r.exit_code for r in s.runs] == [None] and s.claimed_outcome == "unknown"
    r = s.rung(RULE_1)
    assert (r.name, r.summary, r.outcome_detected) == ("done_claimed", "result unknown", False)


def test_a_chat_only_session_claims_done_with_nothing_to_detect_outcomes() -> None:
    r = parse("chat.jsonl").rung(RULE_1)
    assert (r.name, r.outcome_detected) == ("done_claimed", False)


def test_garbage_is_no_session() -> None:
    assert ClaudeCode().parse("x", b"\x00\xff not json\n[1,2]\n{}\n") == []


def test_scan_list_matrix(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    index = tmp_path / "index.jsonl"
    assert main(["sessions", "scan", str(HERE), "--index", str(index), "--json"]) == 0
    scanned = json.loads(capsys.readouterr().out)
    assert scanned["sessions"] == 4 and scanned["skipped_lines"] == 1
    assert scanned["rungs"] == {"commit_observed": 1, "artifact_changed": 1, "done_claimed": 2}
    assert main(["sessions", "list", "--index", str(index), "--limit", "2", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["sessions"]
    assert [r["rung_name"] for r in listed] == ["done_claimed", "artifact_changed"]  # lost, red (by path)
    assert main(["sessions", "matrix", "--index", str(index), "--json"]) == 0
    [row] = json.loads(capsys.readouterr().out)["adapters"]
    assert row == {"adapter": "claude_code", "n": 4, "outcome_detected": 2, "verified": 1}
    assert main(["sessions", "matrix", "--index", str(tmp_path / "none.jsonl")]) == 1
    assert "sessions index" in capsys.readouterr().err
