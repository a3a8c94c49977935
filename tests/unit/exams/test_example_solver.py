"""The example agents' rule-based solver (examples/agents/solver.py) on fresh coding items.

It did not write code, so the demo's "good" agent failed every python-code@1 item that re-verification
drew for it: with 3 fresh items a report, its capability swung from 100 to 0 by the draw, and the demo's
leaderboard put it first only by luck (CI failed once with it third). It now solves the eight forms,
graded here by the real grader in the sandbox; the careless persona slips on some.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from trustscore.exams.generators import get_generator
from trustscore.grading import Response, Turn, grade_item

SEEDS = range(40)


def _solver() -> ModuleType:
    path = Path(__file__).resolve().parents[3] / "examples" / "agents" / "solver.py"
    spec = importlib.util.spec_from_file_location("example_solver", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_good_solves_every_python_code_form_and_careless_slips() -> None:
    solver, gen = _solver(), get_generator("python-code@1")
    kinds, careless_failed = set(), 0
    for n in SEEDS:
        item = gen.make(n.to_bytes(8, "big"))
        messages = [{"role": "user", "content": item.ask.prompts[0]}]
        good = grade_item(item, Response([Turn(solver.solve("good", messages), 10)]))
        assert good.value == 1000, (item.ask.prompts[0], good.detail)
        careless = grade_item(item, Response([Turn(solver.solve("careless", messages), 10)]))
        careless_failed += careless.value < 1000
        kinds.add(item.ask.prompts[0].split(")` ", 1)[1][:30])
    assert len(kinds) == 8  # every form was drawn
    assert 0 < careless_failed < len(SEEDS)
    assert (
        solver.solve("good", [{"role": "user", "content": "Write a Python function `f(x)` sorting x."}])
        is None
    )
