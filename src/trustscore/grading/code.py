"""``python-tests@1``: the reply is a Python function, run against hidden tests in the sandbox.

The code is the last fenced block that defines the function (else the last fenced block, else the
whole reply). Each hidden test calls ``function(*args)``; the return value, JSON-encoded in the sandbox,
must equal ``expected`` exactly (types included: ``True`` is not ``1``; tuples arrive as lists).
value = passed / total; any resource-limit kill, timeout or crash fails the item outright.
"""

from __future__ import annotations

import re
from typing import Any

from trustscore.grading import sandbox
from trustscore.grading.grader import Grader, arg, no_answer, require
from trustscore.grading.model import MAX_MILLIS, Grade, Item, Response, failure, partial, success

_FENCE = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)```", re.DOTALL | re.IGNORECASE)
_LIMIT_KEYS = {"cpu_s", "wall_s", "memory_mb"}


def extract_code(text: str, function: str) -> str:
    blocks = _FENCE.findall(text)
    for block in reversed(blocks):
        if re.search(rf"^\s*(?:async\s+)?def\s+{re.escape(function)}\s*\(", block, re.MULTILINE):
            return str(block)
    return str(blocks[-1]) if blocks else text


def strict_equal(a: Any, b: Any) -> bool:
    """JSON-value equality that tells booleans from numbers and integers from floats."""
    if type(a) is not type(b):
        return False
    if isinstance(a, list):
        return len(a) == len(b) and all(strict_equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(strict_equal(a[k], b[k]) for k in a)
    return bool(a == b)


def check(item: Item) -> None:
    require(item.ask.kind == "single", item, "code items are asked once")
    require(set(item.args) <= {"function", "tests", "limits"}, item, "unknown arguments")
    require(arg(item, "function", str).isidentifier(), item, "function must be an identifier")
    tests = arg(item, "tests", list)
    require(len(tests) > 0, item, "needs at least one hidden test")
    for t in tests:
        require(isinstance(t, dict) and set(t) == {"args", "expected"} and isinstance(t["args"], list), item,
                "each test is {args: [...], expected: value}")  # fmt: skip
    limits = item.args.get("limits", {})
    require(isinstance(limits, dict) and set(limits) <= _LIMIT_KEYS, item, f"limits may set {_LIMIT_KEYS}")


def _limits(item: Item) -> sandbox.Limits:
    base = sandbox.Limits()
    overrides = item.args.get("limits", {})
    return sandbox.Limits(
        cpu_s=int(overrides.get("cpu_s", base.cpu_s)),
        wall_s=float(overrides.get("wall_s", base.wall_s)),
        memory_mb=int(overrides.get("memory_mb", base.memory_mb)),
    )


def grade(item: Item, response: Response) -> Grade:
    if not response.turns or not response.turns[0].output.strip():
        return no_answer(response)
    function = item.args["function"]
    tests = item.args["tests"]
    code = extract_code(response.turns[0].output, function)
    run = sandbox.run_python(code, function, [t["args"] for t in tests], _limits(item))
    if run.status != "ok":
        return failure(f"sandbox {run.status}: {run.detail}".strip(), passed=0, total=len(tests))
    passed = sum(
        1 for t, r in zip(tests, run.results, strict=False) if r.ok and strict_equal(r.value, t["expected"])
    )
    first_error = next((r.error for r in run.results if not r.ok), "")
    facets = {"passed": passed, "total": len(tests)}
    detail = f"{passed}/{len(tests)} hidden tests passed" + (
        f" (first error: {first_error})" if first_error else ""
    )
    if passed == len(tests):
        return success(detail, **facets)
    if passed == 0:
        return failure(detail, **facets)
    return partial(passed * MAX_MILLIS // len(tests), detail, **facets)


PYTHON_TESTS_V1 = Grader("python-tests", 1, grade, check, family="execution")
