"""``trustscore score``: JSON lines out, sorted by agent; every bad input line reported."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from trustscore.cli import score
from trustscore.errors import ConfigError, InvalidInput
from trustscore.scoring.medals import RELEASED_DIGESTS

from .conftest import WEIGHTS

AT = "2026-11-30T00:00:00Z"


def run(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    score.register(parser.add_subparsers())
    args = parser.parse_args(["score", *argv])
    code: int = args.func(args)
    return code


def write(path: Path, lines: list[dict[str, object] | str]) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines))
    return path


def ev(agent: str, **kw: object) -> dict[str, object]:
    line: dict[str, object] = {
        "agent": agent,
        "dimension": "capability",
        "source": "real",
        "value": 1,
        "result": None,
        "key": None,
        "at": "2026-11-29T00:00:00Z",
        "issuer": None,
    }
    line.update(kw)
    return line


def test_prints_sorted_json_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    evidence = write(
        tmp_path / "e.jsonl",
        [
            ev("zeta"),
            ev("alpha", value=0.5, at="2026-11-29T00:00:00+00:00"),
            ev("late", at="2026-12-01T00:00:00Z"),
        ],
    )
    snapshots = write(
        tmp_path / "s.jsonl",
        [{"agent": "mid", "at": "2026-11-01T00:00:00Z", "total": 500, "model_version": "baseline-v0.3"}],
    )
    assert (
        run(
            "--weights",
            str(WEIGHTS / "baseline-v0.3.toml"),
            "--evidence",
            str(evidence),
            "--snapshots",
            str(snapshots),
            "--at",
            AT,
        )
        == 0
    )
    out = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [r["agent"] for r in out] == ["alpha", "late", "mid", "zeta"]
    alpha = out[0]
    assert list(alpha)[:10] == [
        "agent",
        "model_version",
        "weights_digest",
        "total",
        "adjusted",
        "grade",
        "coverage",
        "confidence",
        "n",
        "dimensions",
    ]
    assert alpha["dimensions"]["capability"] == 50.0 and alpha["total"] == 60
    assert out[1]["n"] == 0 and out[1]["total"] is None  # only evidence after --at


def test_model_output_carries_uncertainty(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    evidence = write(tmp_path / "e.jsonl", [ev("a", key=f"q{i}") for i in range(5)])
    assert run("--weights", str(WEIGHTS / "trustscore-v1.toml"), "--evidence", str(evidence), "--at", AT) == 0
    (rating,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rating["model_version"] == "trustscore-v1"
    assert rating["uncertainty"]["dimensions"]["capability"]["n"] == 5


def test_bad_lines_reported_with_numbers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    evidence = write(
        tmp_path / "e.jsonl",
        [
            ev("a"),
            "{not json",
            ev("a", dimension="charisma"),
            ev("a", value=None),
            ev("a", at="2026-11-29T00:00:00+02:00"),
            "",
            ev("a", extra="field"),
            ev("a", value=True),
        ],
    )
    with pytest.raises(InvalidInput, match="7 bad input line"):
        run("--weights", str(WEIGHTS / "baseline-v0.3.toml"), "--evidence", str(evidence), "--at", AT)
    captured = capsys.readouterr()
    assert captured.out == ""
    numbers = [int(line.split(":")[1]) for line in captured.err.splitlines()]
    assert numbers == [2, 3, 4, 5, 6, 7, 8]
    assert "unknown dimension 'charisma'" in captured.err
    assert "needs a value or a result" in captured.err


def test_bad_snapshot_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    evidence = write(tmp_path / "e.jsonl", [ev("a")])
    snapshots = write(
        tmp_path / "s.jsonl",
        [{"agent": "a", "at": "2026-11-01T00:00:00Z", "total": 1.5, "model_version": "m"}],
    )
    with pytest.raises(InvalidInput, match="1 bad input line"):
        run(
            "--weights",
            str(WEIGHTS / "baseline-v0.3.toml"),
            "--evidence",
            str(evidence),
            "--snapshots",
            str(snapshots),
            "--at",
            AT,
        )
    assert "s.jsonl:1:" in capsys.readouterr().err


def test_bad_at_and_missing_files(tmp_path: Path) -> None:
    evidence = write(tmp_path / "e.jsonl", [ev("a")])
    with pytest.raises(InvalidInput, match="RFC 3339"):
        run(
            "--weights", str(WEIGHTS / "baseline-v0.3.toml"), "--evidence", str(evidence), "--at", "yesterday"
        )
    with pytest.raises(InvalidInput, match="cannot read"):
        run("--weights", str(WEIGHTS / "baseline-v0.3.toml"), "--evidence", str(tmp_path / "x"), "--at", AT)
    with pytest.raises(ConfigError):
        run("--weights", str(tmp_path / "w.toml"), "--evidence", str(evidence), "--at", AT)


def test_prints_medals_when_the_weights_file_has_them(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """trustscore-v2 has a medals file beside it: each line carries medals, by the service's function;
    baseline-v0.3 has none: its lines are unchanged (no medals key)."""
    evidence = write(tmp_path / "e.jsonl", [ev("a", key=f"k{i}") for i in range(12)])
    assert run("--weights", str(WEIGHTS / "trustscore-v2.toml"), "--evidence", str(evidence), "--at", AT) == 0
    [line] = [json.loads(x) for x in capsys.readouterr().out.splitlines()]
    capability = line["medals"]["dimensions"]["capability"]
    assert capability == {"medal": "gold", "real_n": 12, "freshness": 0.97716, "reason": None}
    assert line["medals"]["dimensions"]["delivery"]["reason"] == "no_score"
    assert line["medals"]["rules_digest"] == RELEASED_DIGESTS["trustscore-v2", 2]  # the newest release
    assert run("--weights", str(WEIGHTS / "baseline-v0.3.toml"), "--evidence", str(evidence), "--at", AT) == 0
    assert "medals" not in json.loads(capsys.readouterr().out)


def test_medals_under_an_earlier_release(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Public exam items earned medals under release 1, which --medals recomputes; the served release 2
    counts them for the score only. A medals file of another model is refused."""
    public = write(tmp_path / "e.jsonl", [ev("a", key=f"k{i}", source="real-benchmark") for i in range(40)])
    args = ["--weights", str(WEIGHTS / "trustscore-v2.toml"), "--evidence", str(public), "--at", AT]
    assert run(*args) == 0
    served = json.loads(capsys.readouterr().out)["medals"]
    assert (served["dimensions"]["capability"]["medal"], served["dimensions"]["capability"]["real_n"]) == (
        None,
        0,
    )
    assert run(*args, "--medals", str(WEIGHTS / "trustscore-v2.medals.toml")) == 0
    first = json.loads(capsys.readouterr().out)["medals"]
    assert first["rules_digest"] == RELEASED_DIGESTS["trustscore-v2", 1]
    assert first["dimensions"]["capability"]["medal"] is not None
    with pytest.raises(ConfigError, match="names weights trustscore-v3"):
        run(*args, "--medals", str(WEIGHTS / "trustscore-v3.medals-2.toml"))


def test_the_output_is_the_same_in_any_number_of_threads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Agents with evidence, with snapshots only, with capped issuers: the same bytes in 1, 2 and 8 threads."""
    lines: list[dict[str, object] | str] = [
        ev(
            f"agent-{i % 23:02d}",
            dimension=("capability", "delivery", "security")[i % 3],
            value=(i * 37 % 101) / 100,
            key=f"k{i % 5}" if i % 4 else None,
            issuer=f"issuer-{i % 3}" if i % 2 else None,
            at=f"2026-11-{1 + i % 28:02d}T00:00:00Z",
        )
        for i in range(300)
    ]
    evidence = write(tmp_path / "e.jsonl", lines)
    snapshots = write(
        tmp_path / "s.jsonl",
        [
            {
                "agent": f"snap-{i % 4}",
                "at": f"2026-10-{1 + i:02d}T00:00:00Z",
                "total": 400 + 7 * i,
                "model_version": "baseline-v0.3",
            }
            for i in range(12)
        ],
    )
    outputs = []
    for threads in ("1", "2", "8"):
        argv = ["--weights", str(WEIGHTS / "trustscore-v2.toml"), "--evidence", str(evidence)]
        assert run(*argv, "--snapshots", str(snapshots), "--at", AT, "--threads", threads) == 0
        outputs.append(capsys.readouterr().out)
    assert len(outputs[0].splitlines()) == 23 + 4
    assert outputs[1] == outputs[0] and outputs[2] == outputs[0]


@pytest.mark.parametrize("threads", ["0", "9", "two"])
def test_threads_out_of_range_is_a_usage_error(threads: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        run("--weights", "w.toml", "--evidence", "e.jsonl", "--at", AT, "--threads", threads)
    assert exit_info.value.code == 2
    assert "--threads" in capsys.readouterr().err
