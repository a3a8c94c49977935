"""The example agents' rule-based solver (examples/agents/solver.py) on fresh coding and inference items.

It did not write code, so the demo's "good" agent failed every python-code@1 item that re-verification
drew for it: with 3 fresh items a report, its capability swung from 100 to 0 by the draw, and the demo's
leaderboard put it first only by luck (CI failed once with it third). It now solves the eight forms,
graded here by the real grader in the sandbox; the careless persona slips on some.

The same happened again with inference@1, added to re-verification's capability draw after the solver was
written: "good" answered none of its nine forms, and CI failed with the bluffer first (good's capability
65 by the draw, the bluffer's endpoint 91). It now works out every form.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from trustscore.exams.generators import get_generator
from trustscore.exams.loader import ExamDirs, load_exam
from trustscore.grading import Response, Turn, grade_item

SEEDS = range(120)
# Phrases that tell the forms of a generator apart (each form has one): every form must be drawn.
FORMS = {
    "python-code@1": ("divisible by", "longer than", "rotated left", "shifting each", "running sums",
                      "for the sequence", "sum of the digits", "start with the letter"),
    "inference@1": ("er than", "A train", "A shop", "as many", "If today", "tank", "consecutive",
                    "necessarily", "immediately to the left"),
}  # fmt: skip
SLIPS = {"arithmetic@1", "sequence@1", "inference@1", "python-code@1"}  # where careless gets some wrong
SOLVED = (*sorted(SLIPS), "injection-probe@1", "json-record@1")  # single-prompt forms the solver knows


def _solver(name: str = "solver") -> ModuleType:
    path = Path(__file__).resolve().parents[3] / "examples" / "agents" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"example_{name}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("ref", SOLVED)
def test_good_solves_every_form_and_careless_slips(ref: str) -> None:
    solver, gen = _solver(), get_generator(ref)
    drawn, careless_failed = set(), 0
    for n in SEEDS:
        item = gen.make(n.to_bytes(8, "big"))
        messages = [{"role": "user", "content": item.ask.prompts[0]}]
        good = grade_item(item, Response([Turn(solver.solve("good", messages), 10)]))
        assert good.value == 1000, (item.ask.prompts[0], good.detail)
        careless = grade_item(item, Response([Turn(solver.solve("careless", messages), 10)]))
        careless_failed += careless.value < 1000
        drawn |= {form for form in FORMS.get(ref, ()) if form in item.ask.prompts[0]}
    assert drawn == set(FORMS.get(ref, ()))
    assert 0 < careless_failed < len(SEEDS) if ref in SLIPS else careless_failed == 0


def test_an_unknown_coding_task_is_not_answered() -> None:
    task = [{"role": "user", "content": "Write a Python function `f(x)` sorting x."}]
    assert _solver().solve("good", task) is None


def test_the_personas_answer_scope_probes_as_the_scope_agent_does() -> None:
    """Every persona scored 0 on the public scope@1 in the demo, good included: scope probes reached the
    solver, which does not know them. Now the honest personas answer as examples/agents/scope_agent.py
    (a result, a failure beyond the declarations, a decline out of scope) and the bluffer as its
    overconfident agent."""
    scripted, exam = _solver("scripted"), load_exam("scope@1", ExamDirs())
    for item in exam.items:
        request = {"messages": [{"role": "user", "content": item.ask.prompts[0]}]}
        good = grade_item(item, Response([Turn(scripted.answer("good", request), 10)]))
        assert good.value == 1000, (item.id, good.detail)
        bluffer = grade_item(item, Response([Turn(scripted.answer("bluffer", request), 10)]))
        assert bluffer.value < 1000 or item.args["expect"] == "success", (item.id, bluffer.detail)
