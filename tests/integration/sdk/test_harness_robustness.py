"""``trustscore exam run`` survives hostile or broken agents (issue #17, harness half of graders v2).

Each test is an attack that broke the starting code: a lone surrogate crashed the run with a
traceback; one stray stdout line made a ``cmd:`` agent fail every later item; a ``python:`` agent's
``os._exit`` killed the CLI silently; an unreachable agent produced a signed all-zero report and exit 0.
The CLI runs as a real subprocess where the agent could take the test process down with it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from trustscore import canonical
from trustscore.cli.main import main
from trustscore.ledger import keys

ROOT = Path(__file__).resolve().parents[3]
SCRIPTED = ROOT / "examples" / "agents" / "scripted.py"

AGENTS_PY = """
import ctypes, os, sys, time
sys.path.insert(0, {examples!r})
import scripted

def surrogate(request):
    return "note \\ud800 and \\udfff\\n" + scripted.good(request)

def dies_on_002(request):
    if request.item_id == "rel-002":
        os._exit(3)
    return scripted.good(request)

def segfaults_on_003(request):
    if request.item_id == "rel-003":
        ctypes.string_at(0)
    return scripted.good(request)

def always_dies(request):
    os._exit(9)

def prints_to_stdout(request):
    print("debug: thinking about", request.item_id)
    os.write(1, b"raw write to fd 1\\n")
    try:
        input()
    except EOFError:
        pass
    return scripted.good(request)

def raises(request):
    raise RuntimeError("broken")
"""

CMD_STRAY = """
import json, sys
sys.path.insert(0, {examples!r})
import scripted
print("agent starting up...", flush=True)
for line in sys.stdin:
    request = json.loads(line)
    print("thinking about " + request["item_id"], flush=True)
    print(json.dumps({{"id": request["id"] - 1, "output": "stale"}}), flush=True)
    print(json.dumps({{"id": request["id"], "output": scripted.good(request)}}), flush=True)
"""

CMD_SURROGATE = """
import json, sys
sys.path.insert(0, {examples!r})
import scripted
for line in sys.stdin:
    request = json.loads(line)
    out = json.dumps({{"id": request["id"], "output": "\\ud83d\\n" + scripted.good(request)}})
    print(out, flush=True)
"""

CMD_HANGS_ON_003 = """
import json, sys, time
sys.path.insert(0, {examples!r})
import scripted
for line in sys.stdin:
    request = json.loads(line)
    if request["item_id"] == "rel-003":
        time.sleep(3600)
    print(json.dumps({{"id": request["id"], "output": scripted.good(request)}}), flush=True)
"""


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    keys.write_key_file(tmp_path / "agent.key", keys.SigningKey.generate())
    examples = str(SCRIPTED.parent)
    (tmp_path / "agents.py").write_text(AGENTS_PY.format(examples=examples))
    for name, body in (("stray", CMD_STRAY), ("surrogate_cmd", CMD_SURROGATE), ("hangs", CMD_HANGS_ON_003)):
        (tmp_path / f"{name}.py").write_text(body.format(examples=examples))
    return tmp_path


def _run_cli(workdir: Path, agent: str, *extra: str) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "trustscore.cli.main", "exam", "run", "--exam", "reliability@1",
            "--agent", agent, "--key", str(workdir / "agent.key"), "--out", str(workdir / "report.json"),
            "--quiet", *extra]  # fmt: skip
    return subprocess.run(argv, capture_output=True, text=True, timeout=300, cwd=workdir, check=False)


def _items(report: Path) -> dict[str, dict[str, object]]:
    env = json.loads(report.read_text())
    stmt = json.loads(canonical.b64decode(env["payload"]))
    return {i["item_id"]: i for i in stmt["predicate"]["items"]}


def _results(report: Path) -> dict[str, str]:
    return {k: str(v["client_result"]) for k, v in _items(report).items()}


def _one_line_error(proc: subprocess.CompletedProcess[str]) -> str:
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("trustscore: error: ") and "Traceback" not in proc.stderr
    return lines[0]


def test_lone_surrogate_is_replaced_per_item_not_a_crash(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(workdir)
    out = workdir / "report.json"
    code = main(["exam", "run", "--exam", "reliability@1", "--agent", f"python:{workdir / 'agents.py'}:surrogate",
                 "--key", str(workdir / "agent.key"), "--out", str(out), "--quiet"])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 0, captured.err
    items = _items(out)
    assert len(items) == 6
    for item in items.values():
        for turn in item["turns"]:  # type: ignore[attr-defined]
            assert turn["output"].startswith("note \ufffd and \ufffd\n")
    assert "rel-001: replaced 6 invalid characters" in captured.err  # 2 in each of 3 answers
    assert set(_results(out).values()) == {"success"}


def test_lone_surrogate_from_a_cmd_agent_is_replaced(workdir: Path) -> None:
    proc = _run_cli(workdir, f"cmd:{sys.executable} {workdir / 'surrogate_cmd.py'}")
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    assert set(_results(workdir / "report.json").values()) == {"success"}


def test_cmd_agent_resyncs_after_stray_lines(workdir: Path) -> None:
    proc = _run_cli(workdir, f"cmd:{sys.executable} {workdir / 'stray.py'}")
    assert proc.returncode == 0, proc.stderr
    assert _results(workdir / "report.json") == dict.fromkeys(_results(workdir / "report.json"), "success")


def test_cmd_agent_timeout_fails_only_that_item(workdir: Path) -> None:
    proc = _run_cli(workdir, f"cmd:{sys.executable} {workdir / 'hangs.py'}", "--item-timeout", "1")
    assert proc.returncode == 0, proc.stderr
    results = _results(workdir / "report.json")
    assert results.pop("rel-003") == "failure"
    assert set(results.values()) == {"success"}


@pytest.mark.parametrize(("agent", "bad", "reason"), [("dies_on_002", "rel-002", "exited with status 3"),
                                                      ("segfaults_on_003", "rel-003", "signal")])  # fmt: skip
def test_python_agent_hard_exit_fails_its_item_not_the_cli(
    workdir: Path, agent: str, bad: str, reason: str
) -> None:
    proc = _run_cli(workdir, f"python:{workdir / 'agents.py'}:{agent}")
    assert proc.returncode == 0, proc.stderr
    items = _items(workdir / "report.json")
    assert len(items) == 6
    assert reason in str(items[bad]["error"])
    assert {k: v["client_result"] for k, v in items.items() if k != bad} == dict.fromkeys(
        [k for k in items if k != bad], "success"
    )


def test_python_agent_stdout_does_not_break_the_protocol(workdir: Path) -> None:
    proc = _run_cli(workdir, f"python:{workdir / 'agents.py'}:prints_to_stdout")
    assert proc.returncode == 0, proc.stderr
    assert set(_results(workdir / "report.json").values()) == {"success"}


def test_python_agent_that_always_dies_writes_no_report(workdir: Path) -> None:
    proc = _run_cli(workdir, f"python:{workdir / 'agents.py'}:always_dies")
    assert proc.returncode == 1
    assert "exited with status 9" in _one_line_error(proc)
    assert not (workdir / "report.json").exists()


def test_unreachable_http_agent_writes_no_report(workdir: Path) -> None:
    proc = _run_cli(workdir, "http://127.0.0.1:9/")
    assert proc.returncode == 1
    line = _one_line_error(proc)
    assert "gave no answer" in line and "cannot reach agent" in line and "no report written" in line
    assert not (workdir / "report.json").exists()


def test_unreachable_agent_with_progress_bar_ends_with_the_error(workdir: Path) -> None:
    argv = [sys.executable, "-m", "trustscore.cli.main", "exam", "run", "--exam", "reliability@1",
            "--agent", "http://127.0.0.1:9/", "--key", str(workdir / "agent.key"),
            "--out", str(workdir / "report.json")]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.splitlines()[-1].startswith(
        "trustscore: error: agent http:http://127.0.0.1:9/ gave no answer"
    )


def test_python_agent_that_always_raises_writes_no_report(workdir: Path) -> None:
    proc = _run_cli(workdir, f"python:{workdir / 'agents.py'}:raises")
    assert proc.returncode == 1
    assert "agent raised RuntimeError: broken" in _one_line_error(proc)


def test_python_agent_that_cannot_load_is_a_one_line_error(workdir: Path) -> None:
    (workdir / "broken.py").write_text("import os\nos._exit(5)\n")
    proc = _run_cli(workdir, f"python:{workdir / 'broken.py'}:fn")
    assert proc.returncode == 1
    assert "agent" in _one_line_error(proc)
    proc = _run_cli(workdir, "python:no_such_module_xyz:fn")
    assert proc.returncode == 1
    assert "cannot import agent module 'no_such_module_xyz'" in _one_line_error(proc)


def test_unreachable_agent_stops_after_three_items_of_a_long_exam(workdir: Path) -> None:
    argv = [sys.executable, "-m", "trustscore.cli.main", "exam", "run", "--exam", "capability@1",
            "--agent", "http://127.0.0.1:9/", "--key", str(workdir / "agent.key"),
            "--out", str(workdir / "report.json"), "--quiet"]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 1
    assert "gave no answer to any of the first 3 items" in _one_line_error(proc)
    assert not (workdir / "report.json").exists()
