"""One server scope run: asking a real local HTTP agent through the outbound guard, against a baseline.

    python bench/scope_runs.py [--runs 5]

Builds the ``scope@1`` form of ``examples/agents/scope_declarations.json``, instantiates it from a fresh
seed per run, and times ``services.scope_runs.ask_items`` (every item over real HTTP through the
outbound guard, then graded) against the baseline measured in the same run: the same items put to the
same agent function in-process and graded. Prints items per run, seconds per run for both, and the
ratio (the cost of the guarded HTTP round trips).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import msgspec

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from examples.agents import scope_agent  # noqa: E402

from trustscore.exams.forms import instantiate, scope_form, sitting_exam  # noqa: E402
from trustscore.exams.loader import ExamDirs, load_exam  # noqa: E402
from trustscore.grading import Response, Turn, grade_item  # noqa: E402
from trustscore.kinds.cards import CapabilityDeclaration  # noqa: E402
from trustscore.kinds.scope_run import SCOPE_EXAM  # noqa: E402
from trustscore.outbound.guard import OutboundPolicy  # noqa: E402
from trustscore.services.scope_runs import ask_items  # noqa: E402


def in_process(items: list[Any]) -> None:
    """The baseline: the agent function called directly (single prompts; dialogues skipped), graded."""
    for item in items:
        if item.ask.kind == "dialogue":
            continue
        prompt = {"messages": [{"role": "user", "content": item.ask.prompts[0]}]}
        grade_item(item, Response([Turn(scope_agent.honest(prompt), 1)]))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    print("command:", " ".join(sys.argv), "| cpus:", os.cpu_count())
    data = json.loads((ROOT / "examples/agents/scope_declarations.json").read_text())
    decls = [msgspec.convert(d, CapabilityDeclaration) for d in data["declarations"]]
    form = scope_form(decls, data["non_capabilities"])
    base = load_exam(SCOPE_EXAM, ExamDirs())
    server, url = scope_agent.serve()
    policy = OutboundPolicy(allow_loopback=True)
    served, local, counts = [], [], []
    for _ in range(args.runs):
        items = instantiate(form, secrets.token_bytes(32))
        exam = sitting_exam(base, items)
        t0 = time.perf_counter()
        results = ask_items(exam, items, url, policy, 600.0)
        served.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        in_process(items)
        local.append(time.perf_counter() - t0)
        counts.append(len(results))
        assert all(a.sha256 is not None for _, a in results), "every item should be answered"
    server.shutdown()
    s, b = statistics.median(served), statistics.median(local)
    print(f"items per run: {counts[0]} | runs: {args.runs}")
    print(f"server run over guarded HTTP: median {s:.3f} s | in-process baseline: median {b:.3f} s")
    print(f"ratio (HTTP run / in-process): {s / b:.1f}x")


if __name__ == "__main__":
    main()
