"""The ``trustscore exam`` commands end to end: list, run, grade (incl. tampering) and submit."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pytest

from trustscore import canonical
from trustscore.cli import exam as exam_cli
from trustscore.errors import TrustscoreError
from trustscore.exams.loader import DEFAULT_PUBLIC_DIR
from trustscore.ledger import keys

AGENT = DEFAULT_PUBLIC_DIR.parent / "examples" / "agents" / "scripted.py"


def cli(*argv: str) -> int:
    """Run ``trustscore exam ...`` as cli/main.py does (errors -> one line on stderr, exit 1)."""
    parser = argparse.ArgumentParser(prog="trustscore")
    exam_cli.register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except TrustscoreError as exc:
        print(f"trustscore: error: {exc.message}", file=sys.stderr)
        return 1
    return code


@pytest.fixture
def key_file(tmp_path: Path) -> Path:
    path = tmp_path / "agent.key"
    keys.write_key_file(path, keys.SigningKey.generate())
    return path


@pytest.fixture
def report(tmp_path: Path, key_file: Path) -> Path:
    out = tmp_path / "report.json"
    agent = f"cmd:{sys.executable} {AGENT} --persona careless"
    assert (
        cli(
            "exam",
            "run",
            "--exam",
            "integrity@1",
            "--agent",
            agent,
            "--key",
            str(key_file),
            "--out",
            str(out),
        )
        == 0
    )
    return out


def test_list(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("exam", "list") == 0
    out = capsys.readouterr().out
    assert "capability@1" in out and "negotiation@1" in out


def test_run_prints_progress_and_summary(
    tmp_path: Path, key_file: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "r.json"
    agent = f"python:{AGENT}:good"
    assert (
        cli(
            "exam",
            "run",
            "--exam",
            "reliability@1",
            "--agent",
            agent,
            "--key",
            str(key_file),
            "--out",
            str(out),
        )
        == 0
    )
    captured = capsys.readouterr()
    assert captured.err == ""  # stderr is not a terminal here: no progress bar
    assert "6 items: 6 success" in captured.out
    assert "written to" in captured.out
    # On a terminal the bar is drawn on stderr.
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    out.unlink()
    assert (
        cli(
            "exam",
            "run",
            "--exam",
            "reliability@1",
            "--agent",
            agent,
            "--key",
            str(key_file),
            "--out",
            str(out),
        )
        == 0
    )
    assert "6/6" in capsys.readouterr().err


def test_run_refuses_to_overwrite(report: Path, key_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli(
        "exam",
        "run",
        "--exam",
        "integrity@1",
        "--agent",
        "python:json:dumps",
        "--key",
        str(key_file),
        "--out",
        str(report),
    )
    assert code == 1
    assert "already exists" in capsys.readouterr().err


def test_run_unknown_exam(tmp_path: Path, key_file: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli("exam", "run", "--exam", "integrity@9", "--agent", "python:json:dumps", "--key", str(key_file),
               "--out", str(tmp_path / "x.json"))  # fmt: skip
    assert code == 1
    assert "exam set integrity@9 not found" in capsys.readouterr().err


def test_grade_matches_the_run(report: Path, capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    assert cli("exam", "grade", str(report), "--json") == 0
    grades = json.loads(capsys.readouterr().out)
    assert len(grades) == 12
    assert {g["result"] for g in grades} >= {"success", "failure"}


def test_grade_tampered_report(report: Path, capsys: pytest.CaptureFixture[str]) -> None:
    env = json.loads(report.read_text())
    stmt = json.loads(canonical.b64decode(env["payload"]))
    stmt["predicate"]["elapsed_ms"] += 1
    env["payload"] = canonical.b64encode(canonical.encode(stmt))
    report.write_text(json.dumps(env))
    capsys.readouterr()
    assert cli("exam", "grade", str(report)) == 1
    assert "does not verify" in capsys.readouterr().err


def test_grade_garbage_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("not json")
    assert cli("exam", "grade", str(bad)) == 1
    assert "is not JSON" in capsys.readouterr().err


def test_submit_unreachable(report: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli("exam", "submit", str(report), "--server", "http://127.0.0.1:9") == 1
    assert "cannot reach" in capsys.readouterr().err
