"""``python-code@1``: coding tasks with fresh function names, constants, inputs and hidden tests, graded
by ``python-tests@1`` in the sandbox. The expected results come from a reference implementation run
here, at generation time; :func:`reference_solution` gives the reference source (for tests and demos)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trustscore.exams.generators import Generator, register
from trustscore.exams.generators.common import LOWER, item
from trustscore.exams.generators.rng import Rng
from trustscore.grading.model import Item

_VERBS = ("tally", "score", "fold", "sift", "weigh", "grade", "rank", "pack", "scan", "mark", "trim", "merge")
_NOUNS = ("widgets", "tokens", "parcels", "crates", "beads", "tiles", "shards", "cargo", "bricks", "notes")
_TAIL = (
    "Reply with one Python code block; only the standard library (math, re, collections, itertools, "
    "functools, heapq, bisect, ...) is available and nothing is printed."
)
TESTS = 6


@dataclass(frozen=True)
class Task:
    prompt: str  # with {fn} for the function name
    inputs: Callable[[Rng], list[Any]]  # one test's arguments
    solution: str  # reference source with {fn}


def _ints(r: Rng, n: int, lo: int, hi: int) -> list[int]:
    return [r.between(lo, hi) for _ in range(n)]


def _tasks(r: Rng) -> Task:
    kind = r.below(8)
    if kind == 0:
        k = r.between(2, 13)
        return Task(
            f"Write a Python function `{{fn}}(xs)` returning the sum of the integers in the list xs that are "
            f"divisible by {k} (0 for an empty list).",
            lambda t: [_ints(t, t.between(0, 12), -100, 100)],
            f"def {{fn}}(xs):\n    return sum(x for x in xs if x % {k} == 0)\n",
        )
    if kind == 1:
        k = r.between(2, 8)
        return Task(
            f"Write a Python function `{{fn}}(text)` returning how many whitespace-separated words of text "
            f"are longer than {k} characters.",
            lambda t: [" ".join(t.token(LOWER, t.between(1, 12)) for _ in range(t.between(0, 10)))],
            f"def {{fn}}(text):\n    return sum(1 for w in text.split() if len(w) > {k})\n",
        )
    if kind == 2:
        k = r.between(1, 9)
        return Task(
            f"Write a Python function `{{fn}}(xs)` returning a new list: xs rotated left by {k} places "
            f"(the rotation wraps around; an empty list stays empty).",
            lambda t: [_ints(t, t.between(0, 11), 0, 99)],
            f"def {{fn}}(xs):\n    if not xs:\n        return []\n    k = {k} % len(xs)\n    return xs[k:] + xs[:k]\n",
        )
    if kind == 3:
        k = r.between(1, 25)
        return Task(
            f"Write a Python function `{{fn}}(s)` shifting each lower-case ASCII letter of s forward by {k} "
            f"places in the alphabet (z wraps to a) and leaving every other character unchanged.",
            lambda t: [t.token(LOWER + "  .,AZ", t.between(0, 20))],
            f"def {{fn}}(s):\n    return ''.join(chr((ord(c) - 97 + {k}) % 26 + 97) if 'a' <= c <= 'z' else c for c in s)\n",
        )
    if kind == 4:
        m = r.between(5, 97)
        return Task(
            f"Write a Python function `{{fn}}(xs)` returning the list of running sums of xs, each taken modulo "
            f"{m} (Python's % operator), e.g. for [a, b] the result is [a % {m}, (a + b) % {m}].",
            lambda t: [_ints(t, t.between(0, 10), -50, 200)],
            f"def {{fn}}(xs):\n    out, s = [], 0\n    for x in xs:\n        s += x\n        out.append(s % {m})\n    return out\n",
        )
    if kind == 5:
        # Modulo m: every value stays far below 2**53, the largest integer canonical JSON (RFC 8785)
        # encodes exactly, so items and their digests never hold an integer it refuses.
        p, q, a0, a1 = r.between(1, 4), r.between(-3, 3), r.between(0, 9), r.between(0, 9)
        m = r.between(1_000, 1_000_000)
        return Task(
            f"Write a Python function `{{fn}}(n)` returning a(n) for the sequence a(0) = {a0}, a(1) = {a1}, "
            f"a(n) = ({p}·a(n−1) + ({q})·a(n−2)) mod {m}, where mod gives a value in 0..{m - 1}. "
            f"n is at most 60.",
            lambda t: [t.between(0, 60)],
            f"def {{fn}}(n):\n    a, b = {a0}, {a1}\n    for _ in range(n):\n"
            f"        a, b = b, ({p} * b + ({q}) * a) % {m}\n    return a\n",
        )
    if kind == 6:
        base = r.between(2, 16)
        return Task(
            f"Write a Python function `{{fn}}(n)` returning the sum of the digits of the non-negative integer "
            f"n written in base {base}.",
            lambda t: [t.between(0, 10**9)],
            f"def {{fn}}(n):\n    s = 0\n    while n:\n        n, d = divmod(n, {base})\n        s += d\n    return s\n",
        )
    c = r.choice(LOWER[:20])
    return Task(
        f"Write a Python function `{{fn}}(words)` returning the words of the list that start with the letter "
        f"'{c}', sorted by length and then alphabetically.",
        lambda t: [[c * t.below(2) + t.token(LOWER[:20], t.between(1, 6)) for _ in range(t.between(0, 9))]],
        f"def {{fn}}(words):\n    return sorted((w for w in words if w.startswith('{c}')), key=lambda w: (len(w), w))\n",
    )


def _build(seed: bytes) -> tuple[Item, str]:
    r = Rng(seed, "python-code@1")
    fn = f"{r.choice(_VERBS)}_{r.choice(_NOUNS)}_{r.token(LOWER, 4)}"
    task = _tasks(r)
    source = task.solution.format(fn=fn)
    namespace: dict[str, Any] = {}
    # Our own reference source (a template above), never input: one text is both shown and run.
    exec(compile(source, "<reference>", "exec"), namespace)  # noqa: S102
    reference = namespace[fn]
    tests = []
    for _ in range(TESTS):
        args = task.inputs(r)
        tests.append({"args": args, "expected": reference(*args)})
    prompt = task.prompt.format(fn=fn) + " " + _TAIL
    return item("capability", "python-tests@1", [prompt], {"function": fn, "tests": tests}), source


def python_code(seed: bytes) -> Item:
    """A coding task; function name verb_noun_xxxx (12×10×26⁴ names); eight forms: sum of multiples of k
    (k 2..13); count words longer than k (k 2..8); rotate left by k (k 1..9); shift lower-case letters by
    k (k 1..25); running sums mod m (m 5..97); linear recurrence a(n) = p·a(n−1) + q·a(n−2) (p 1..4,
    q −3..3, a0, a1 0..9); base-b digit sum (b 2..16); words starting with a letter (20 letters) sorted.
    Six hidden tests with fresh random inputs; expected values from the reference implementation."""
    return _build(seed)[0]


def reference_solution(seed: bytes) -> str:
    """The reference solution of :func:`python_code`'s item for ``seed`` (never shown to an agent)."""
    return _build(seed)[1]


PYTHON_CODE = register(Generator("python-code", 1, "capability", python_code, python_code.__doc__ or ""))
