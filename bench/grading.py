"""Grading throughput: items graded per second for each grader family (execution graders separately),
and generation throughput: fresh items made per second by each item generator (docs/exams.md).

    PYTHONPATH=src python bench/grading.py [--seconds 2] [--exec-items 32]

Inputs are the grader conformance vectors plus the good scripted agent's replies to the public exams,
so every family is measured on realistic and tricky responses alike. Pure graders are run in a loop
for ``--seconds`` each; the execution grader (one sandboxed process per item) on ``--exec-items`` items.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from collections import defaultdict
from pathlib import Path

from trustscore.exams.generators import all_generators
from trustscore.exams.loader import DEFAULT_PUBLIC_DIR, ExamDirs, list_exams
from trustscore.grading import Item, Response, Turn, get_grader, grade_item, sandbox
from trustscore.grading.vectors import DEFAULT_DIR, load

ROOT = Path(__file__).resolve().parents[1]


def corpus() -> dict[str, list[tuple[Item, Response]]]:
    by_family: dict[str, list[tuple[Item, Response]]] = defaultdict(list)
    for path in sorted(DEFAULT_DIR.glob("*.json")):
        for case in load(path).cases:
            by_family[get_grader(case.item.grader).family].append((case.item, case.response))
    knowledge = json.loads((ROOT / "examples" / "agents" / "knowledge.json").read_text())
    for exam in list_exams(ExamDirs(DEFAULT_PUBLIC_DIR, None)):
        for item in exam.items:
            # Dialogues are played by the server; items the scripted agents do not know (scope@1, whose
            # items are built from an agent's declarations) have no reply to grade here.
            if item.ask.kind == "dialogue" or not all(p in knowledge for p in item.ask.prompts):
                continue
            replies = [knowledge[p]["good"] for p in item.ask.prompts]
            outputs = (
                replies[0]
                if item.ask.kind == "repeat"
                else [r if isinstance(r, str) else r[0] for r in replies]
            )
            turns = [Turn(o, 10) for o in outputs]
            by_family[get_grader(item.grader).family].append((item, Response(turns)))
    return by_family


def measure(
    cases: list[tuple[Item, Response]], *, seconds: float, max_items: int | None = None
) -> tuple[int, float]:
    done = 0
    start = time.perf_counter()
    while True:
        for item, response in cases:
            grade_item(item, response)
            done += 1
            if max_items is not None and done >= max_items:
                return done, time.perf_counter() - start
        if max_items is None and time.perf_counter() - start >= seconds:
            return done, time.perf_counter() - start


def generation(seconds: float) -> None:
    """Items per second of every generator (seeds 0, 1, 2, ... as 8 bytes), ``seconds`` each."""
    print(f"{'GENERATOR':<20} {'FAMILY':<12} {'ITEMS':>8} {'ITEMS/S':>10}")
    for ref, gen in all_generators().items():
        done, start = 0, time.perf_counter()
        while time.perf_counter() - start < seconds:
            for _ in range(200):
                gen.make(done.to_bytes(8, "big"))
                done += 1
        print(f"{ref:<20} {gen.family:<12} {done:>8} {done / (time.perf_counter() - start):>10.0f}")


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--exec-items", type=int, default=32)
    args = parser.parse_args()
    print("command: PYTHONPATH=src python " + " ".join(["bench/grading.py", *sys.argv[1:]]))
    print(f"python {platform.python_version()} on {platform.machine()} {platform.system()}")
    print(f"{'FAMILY':<14} {'GRADERS':<34} {'CASES':>5} {'GRADED':>8} {'ITEMS/S':>10}")
    for family, cases in sorted(corpus().items()):
        graders = ",".join(sorted({i.grader for i, _ in cases}))
        if family == "execution":
            sandbox.isolation()  # start-up work, as the server does it before serving: zygote and probe
            quick = [
                (i, r) for i, r in cases if "limits" not in i.args
            ]  # the attack vectors are timed by their limits
            done, elapsed = measure(quick, seconds=0, max_items=args.exec_items)
        else:
            done, elapsed = measure(cases, seconds=args.seconds)
        print(f"{family:<14} {graders:<34} {len(cases):>5} {done:>8} {done / elapsed:>10.1f}")
    generation(args.seconds / 2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
