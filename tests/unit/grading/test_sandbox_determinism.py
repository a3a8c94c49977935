"""The same (item, answer) gets the same grade every time, whatever clock or randomness it reads (#17).

The candidate below mixes every source of difference it can reach — os.urandom, the random module (its
global generator, an unseeded instance and SystemRandom), every clock of `time`, datetime.now, and its
PID — into a coin per hidden test. Against a sandbox that passes those through, its grade moves
between gradings (333..1000 was observed); here it must be one value, twenty times.
"""

from __future__ import annotations

from trustscore.grading import Item, Response, Turn, grade_item
from trustscore.grading.model import Ask
from trustscore.grading.sandbox import Limits, run_python

SOURCES = """
import os, random, time, datetime
def f(i):
    seen = [os.urandom(16), random.random(), random.Random().random(), random.SystemRandom().random(),
            time.time(), time.time_ns(), time.monotonic(), time.perf_counter_ns(), time.process_time(),
            time.localtime(), time.strftime('%c'), datetime.datetime.now(), datetime.date.today(),
            os.getpid(), os.getppid(), os.times(), i]
    return hash(repr(seen)) % 2 == 0
"""

ITEM = Item(
    id="coin",
    dimension="capability",
    tier="public",
    grader="python-tests@1",
    ask=Ask("single", ["write f"]),
    args={"function": "f", "tests": [{"args": [i], "expected": True} for i in range(6)]},
)


def test_every_source_of_difference_gives_one_grade_twenty_times() -> None:
    response = Response([Turn(f"```python\n{SOURCES}```", 10)])
    grades = {(g.value, g.result, g.detail) for g in (grade_item(ITEM, response) for _ in range(20))}
    assert len(grades) == 1, grades


def test_the_sources_read_the_same_values_every_run() -> None:
    code = SOURCES.replace("return hash(repr(seen)) % 2 == 0", "return repr(seen)")
    runs = {
        tuple(r.value for r in run_python(code, "f", [[0]], Limits(cpu_s=1, wall_s=5)).results)
        for _ in range(5)
    }
    assert len(runs) == 1, runs


RACES = """
import signal, _thread
def f():
    out = []
    hit = [0]
    def handler(*_):
        hit[0] = 1
    try:  # count loop turns until the CPU limit's warning: how fast was this machine just now?
        signal.signal(signal.SIGXCPU, handler)
        n = 0
        while not hit[0]:
            n += 1
        out.append(n)
    except OSError as exc:
        out.append(type(exc).__name__)
    try:  # a thread racing the caller
        box = [0]
        def spin():
            for _ in range(10**6):
                box[0] += 1
        _thread.start_new_thread(spin, ())
        k = 0
        while box[0] < 10**5:
            k += 1
        out.append(k)
    except RuntimeError as exc:
        out.append(type(exc).__name__)
    return out
"""


def test_cpu_limit_warnings_and_threads_cannot_race() -> None:
    """Review of #17: a SIGXCPU handler or a second thread turned machine speed and scheduling into the
    result; both are refused by the candidate's seccomp filter, so every run reads the same."""
    runs = {
        repr(
            [
                (r.ok, r.value, r.error)
                for r in run_python(RACES, "f", [[]], Limits(cpu_s=1, wall_s=5)).results
            ]
        )
        for _ in range(3)
    }
    assert runs == {repr([(True, ["PermissionError", "RuntimeError"], "")])}, runs
