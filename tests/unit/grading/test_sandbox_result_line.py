"""A candidate cannot turn a wrong answer into no grade at all.

The harness's result line is written by the candidate's own process, so the candidate can shape it: a
return value nested thousands deep (with its recursion limit raised, the harness's ``json.dumps`` takes
it) or a line of its own written to the result pipe before ``os._exit(0)``. The server read that line
trusting its shape, and an exception there (RecursionError, AttributeError, KeyError, TypeError,
ValueError) ended the grading of the whole report: nothing was logged, and the agent could send other
answers, even to the same sitting (found by an adversarial review, 2026-12-07). Whatever the line holds,
a run now ends in a grade: an unreadable result fails its test, a malformed line is a crash (a failure).
"""

from __future__ import annotations

import json
import os
import threading
import time
from pathlib import Path

import pytest

from trustscore.grading import sandbox
from trustscore.grading.code import PYTHON_TESTS_V1
from trustscore.grading.model import Ask, Item, Response, Turn
from trustscore.grading.sandbox import Limits, run_python

FAST = Limits(cpu_s=2, wall_s=10, memory_mb=128)

DEEP = """
import sys
def f(x):
    sys.setrecursionlimit(20000)
    v = 0
    for _ in range(5000):
        v = [v]
    return v
"""

FORGED = """
import os, stat
def f(x):
    for fd in range(3, 40):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                os.write(fd, b"\\n" + %r + b"\\n")
                os._exit(0)
        except OSError:
            pass
    return 0
"""

LINES = [
    b'{"status":"ok","results":"x"}',
    b'{"status":"ok","results":[{"ok":true}]}',
    b'{"status":"ok","results":[{"ok":true,"json":5}]}',
    b'{"status":"ok","results":[{"ok":"yes","json":"1"}]}',
    b'{"status":"ok","results":[{"ok":true,"json":"' + b"9" * 5000 + b'"}]}',
    b'{"status":"ok","results":[{"ok":true,"json":"' + b"[" * 50_000 + b'"}]}',
    b'{"status":"ok","results":[7]}',
    b'{"status":"ok","results":[],"isolation":[1]}',
    b'{"status":"ok","results":[],"isolation":{"net":"yes"}}',
    b'{"status":"load-error","results":[],"error":{"a":1}}',
    b'{"status":"ok","results":[{"ok":false,"error":["x"]}]}',
    b"[" * 100_000,
]


def item() -> Item:
    return Item(
        id="deep-1",
        dimension="capability",
        tier="public",
        grader="python-tests@1",
        ask=Ask(kind="single", prompts=["f(x) returns x + 1"]),
        args={"function": "f", "tests": [{"args": [1], "expected": 2}, {"args": [2], "expected": 3}]},
    )


def graded(code: str) -> tuple[str, int]:
    reply = Response([Turn(output=f"```python\n{code}\n```", elapsed_ms=1)])
    grade = PYTHON_TESTS_V1.grade(item(), reply)
    return grade.result, grade.value


def test_a_result_nested_too_deep_to_read_fails_its_test() -> None:
    run = run_python(DEEP, "f", [[1]], FAST)
    assert run.status == "ok" and not run.results[0].ok, run
    assert "cannot be read" in run.results[0].error
    assert graded(DEEP) == ("failure", 0)


@pytest.mark.parametrize("line", LINES, ids=range(len(LINES)))
def test_a_forged_result_line_is_a_failure_not_an_error(line: bytes) -> None:
    code = FORGED % line
    run = run_python(code, "f", [[1]], FAST)
    assert run.status in ("ok", "crashed", "load-error"), run
    assert not any(r.ok for r in run.results), run
    assert all(len(r.error) <= 400 for r in run.results) and len(run.detail) <= 400
    assert graded(code)[0] == "failure"


CLOSES_ITS_PIPE = """
import os, stat, time
def f(x):
    for fd in range(3, 40):
        try:
            if stat.S_ISFIFO(os.fstat(fd).st_mode):
                os.close(fd)
        except OSError:
            pass
    time.sleep(1.5)
    return 1
"""


def _launchers_cpu(zygote: int) -> dict[int, float]:
    """CPU seconds of each process the zygote started (the runs' launchers), read from /proc."""
    hz = os.sysconf("SC_CLK_TCK")
    found = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_text()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            if int(fields[1]) == zygote:
                found[int(name)] = (int(fields[11]) + int(fields[12])) / hz
    return found


def test_a_candidate_closing_its_result_pipe_does_not_keep_the_launcher_busy() -> None:
    """The launcher relays the candidate's output outside every limit of the run: once the pipe read end
    saw its end (the candidate may close its write end early), select woke at once for ever and the
    launcher spun a core until the run ended (1.4 s of CPU for a 1.5 s sleep; found by review)."""
    if sandbox.isolation().mode != "kernel":
        pytest.skip("the launcher is the kernel sandbox's")
    assert sandbox._state.forkserver is not None
    zygote = sandbox._state.forkserver.pid
    peak: dict[int, float] = {}
    done = threading.Event()

    def sample() -> None:
        while not done.is_set():
            for pid, cpu in _launchers_cpu(zygote).items():
                peak[pid] = max(peak.get(pid, 0.0), cpu)
            time.sleep(0.05)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        run = run_python(CLOSES_ITS_PIPE, "f", [[1]], Limits(cpu_s=2, wall_s=5))
    finally:
        done.set()
        sampler.join()
    assert run.status == "crashed", run  # no result line: a failure
    assert sum(peak.values()) < 0.5, peak


FLOODS_ITS_OUTPUT = """
def f(x):
    seen, todo, file_io = set(), [().__class__.__base__], None
    while todo:
        c = todo.pop()
        if c in seen:
            continue
        seen.add(c)
        if c.__name__ == "FileIO":
            file_io = c
            break
        try:
            todo.extend(c.__subclasses__())
        except TypeError:
            todo.extend(c.__subclasses__(c))
    out = file_io(3, "w", closefd=False)
    block = b"x" * (1 << 20)
    for _ in range(24):
        out.write(block)
    return 1
"""


def test_the_weak_sandbox_keeps_a_bounded_part_of_what_the_candidate_writes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The weak sandbox (an operator's opt-in) read the candidate's output whole into the server's memory:
    200 MiB written took the server to 819 MiB resident (review). It now keeps what the kernel sandbox's
    answer keeps, at most twice MAX_OUTPUT, and the run ends in a grade."""
    kept: list[int] = []
    real = sandbox._interpret

    def measured(returncode: int, out: bytes, limits: Limits) -> sandbox.SandboxRun:
        kept.append(len(out))
        return real(returncode, out, limits)

    monkeypatch.setattr(sandbox, "_interpret", measured)
    request = json.dumps(
        {"code": FLOODS_ITS_OUTPUT, "function": "f", "calls": [[1]], "limits": FAST.for_child()}
    ).encode()
    run = sandbox._run_weak(request, FAST)
    assert kept and kept[0] <= 2 * sandbox.MAX_OUTPUT + 65536, kept
    assert run.status == "crashed", run  # its result line was past what is kept: no result, a failure
