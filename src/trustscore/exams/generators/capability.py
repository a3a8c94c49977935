"""Capability generators: ``arithmetic@1``, ``sequence@1`` and ``inference@1`` (graded by
``exact-answer@1``). Every item has fresh numbers (and, for inference, fresh names and invented words);
each docstring states the parameter space."""

from __future__ import annotations

from collections.abc import Callable

from trustscore.exams.generators import Generator, register
from trustscore.exams.generators.common import ANSWER_LINE, DAYS, NAMES, choice, integer, item, number, word
from trustscore.exams.generators.rng import Rng
from trustscore.grading.model import Item

Spec = dict[str, object]
Template = Callable[[Rng], tuple[str, Spec]]
_GRADER = "exact-answer@1"


def _q(text: str) -> str:
    return f"{text} {ANSWER_LINE}"


# --- arithmetic ----------------------------------------------------------------------------------------


def _product(r: Rng) -> tuple[str, Spec]:
    a, b = r.between(12, 999), r.between(12, 99)
    return f"What is {a} × {b}?", integer(a * b)


def _sum_diff(r: Rng) -> tuple[str, Spec]:
    a, b, c = r.between(100, 9999), r.between(100, 9999), r.between(10, 999)
    return f"What is {a} + {b} − {c}?", integer(a + b - c)


def _powers(r: Rng) -> tuple[str, Spec]:
    x, p, y, q = r.between(2, 60), r.between(2, 3), r.between(2, 40), r.between(2, 4)
    return f"What is {x}^{p} − {y}^{q}?", integer(x**p - y**q)


def _fractions(r: Rng) -> tuple[str, Spec]:
    a, b, c, d = r.between(1, 12), r.between(2, 13), r.between(1, 12), r.between(2, 13)
    return (
        f"What is {a}/{b} + {c}/{d}, as an exact fraction in lowest terms?",
        number(a * d + c * b, b * d),
    )


def _percent(r: Rng) -> tuple[str, Spec]:
    p, n = r.between(1, 19) * 5, r.between(1, 1000) * 20
    return f"What is {p}% of {n}?", number(p * n, 100)


def _div_mul(r: Rng) -> tuple[str, Spec]:
    b, k, c = r.between(2, 25), r.between(2, 40), r.between(2, 19)
    return f"What is {b * k} ÷ {b} × {c}?", integer(k * c)


def _remainder(r: Rng) -> tuple[str, Spec]:
    n, m = r.between(100, 99999), r.between(7, 97)
    return f"What is the remainder when {n} is divided by {m}?", integer(n % m)


def _range_sum(r: Rng) -> tuple[str, Spec]:
    a = r.between(1, 200)
    b = a + r.between(10, 400)
    return f"What is the sum of the integers from {a} to {b} inclusive?", integer((a + b) * (b - a + 1) // 2)


_DECIMALS = (("0.125", 1, 8), ("0.25", 1, 4), ("0.375", 3, 8), ("0.5", 1, 2), ("0.625", 5, 8),
             ("0.75", 3, 4), ("0.2", 1, 5), ("0.4", 2, 5), ("0.6", 3, 5), ("0.8", 4, 5), ("1.5", 3, 2),
             ("2.25", 9, 4))  # fmt: skip


def _decimal(r: Rng) -> tuple[str, Spec]:
    text, num, den = r.choice(_DECIMALS)
    n = r.between(2, 999)
    return f"What is {text} × {n}?", number(num * n, den)


_ARITH: tuple[Template, ...] = (
    _product, _sum_diff, _powers, _fractions, _percent, _div_mul, _remainder, _range_sum, _decimal,
)  # fmt: skip


def arithmetic(seed: bytes) -> Item:
    """Arithmetic with fresh operands; nine forms: a×b (a 12..999, b 12..99); a+b−c (a,b 100..9999,
    c 10..999); x^p−y^q (x 2..60, p 2..3, y 2..40, q 2..4); a/b+c/d in lowest terms (a,c 1..12, b,d
    2..13); p% of n (p 5..95 step 5, n 20..20000 step 20); (b·k)÷b×c (b 2..25, k 2..40, c 2..19);
    n mod m (n 100..99999, m 7..97); sum a..b (a 1..200, b−a 10..400); decimal×n (12 decimals, n 2..999)."""
    r = Rng(seed, "arithmetic@1")
    text, spec = r.choice(_ARITH)(r)
    return item("capability", _GRADER, [_q(text)], {"answer": spec})


# --- sequences -----------------------------------------------------------------------------------------


def _terms(first: list[int], rule: Callable[[list[int]], int], n: int) -> list[int]:
    xs = list(first)
    while len(xs) < n:
        xs.append(rule(xs))
    return xs


def _seq_rule(r: Rng) -> tuple[list[int], int]:
    """(shown terms + hidden terms, how many are shown)."""
    kind = r.below(7)
    if kind == 0:  # arithmetic
        a, d = r.between(-50, 200), r.choice([-1, 1]) * r.between(2, 40)
        return _terms([a], lambda xs: xs[-1] + d, 8), r.between(4, 6)
    if kind == 1:  # geometric
        a, q, c = r.between(1, 30), r.between(2, 6), r.between(-20, 20)
        return [a * q**n + c for n in range(8)], r.between(4, 5)
    if kind == 2:  # quadratic a n^2 + b n + c
        a, b, c = r.between(1, 9), r.between(-20, 20), r.between(-50, 50)
        return [a * n * n + b * n + c for n in range(1, 9)], r.between(5, 6)
    if kind == 3:  # Fibonacci-like from fresh starts
        x, y = r.between(1, 99), r.between(1, 99)
        return _terms([x, y], lambda xs: xs[-1] + xs[-2], 9), r.between(6, 7)
    if kind == 4:  # alternating increments
        a, p, q = r.between(0, 100), r.between(1, 20), r.between(-15, 25)
        return _terms([a], lambda xs: xs[-1] + (p if len(xs) % 2 else q), 9), r.between(6, 7)
    if kind == 5:  # growing differences d, d+e, d+2e, ...
        a, d, e = r.between(0, 60), r.between(1, 12), r.between(1, 6)
        return _terms([a], lambda xs: xs[-1] + d + e * (len(xs) - 1), 8), r.between(5, 6)
    a, m, c = r.between(1, 40), r.between(2, 4), r.between(-20, 20)  # x -> m x + c
    return _terms([a], lambda xs: m * xs[-1] + c, 8), r.between(5, 6)


def sequence(seed: bytes) -> Item:
    """Next term(s) of a sequence with a fresh rule: arithmetic (a −50..200, d ±2..40), shifted geometric
    a·qⁿ+c (a 1..30, q 2..6, c −20..20), quadratic (a 1..9, b −20..20, c −50..50), Fibonacci-like (starts
    1..99), alternating increments (a 0..100, p 1..20, q −15..25), growing differences (a 0..60, d 1..12,
    e 1..6), affine x→mx+c (a 1..40, m 2..4, c −20..20); 4..7 terms shown; one in four asks for the next
    two terms."""
    r = Rng(seed, "sequence@1")
    terms, shown = _seq_rule(r)
    listed = ", ".join(str(t) for t in terms[:shown])
    if r.below(4) == 0:
        text = f"What are the next two numbers in the sequence {listed}, ...? Give them comma-separated."
        spec: Spec = {"type": "sequence", "value": terms[shown : shown + 2]}
    else:
        text, spec = f"What is the next number in the sequence {listed}, ...?", integer(terms[shown])
    return item("capability", _GRADER, [_q(text)], {"answer": spec})


# --- multi-step inference ------------------------------------------------------------------------------


def _ordering(r: Rng) -> tuple[str, Spec]:
    names = r.sample(NAMES, 4)  # names[0] is the most, names[3] the least
    adjective, most, least = r.choice((("older", "oldest", "youngest"), ("taller", "tallest", "shortest"),
                                       ("faster", "fastest", "slowest")))  # fmt: skip
    clues = [f"{names[i]} is {adjective} than {names[i + 1]}." for i in range(3)]
    ask_most = r.below(2) == 0
    options = sorted(names)
    question = f"Who is the {most if ask_most else least}: {', '.join(options[:-1])} or {options[-1]}?"
    return " ".join(r.shuffled(clues)) + " " + question, choice(options, names[0] if ask_most else names[3])


def _train(r: Rng) -> tuple[str, Spec]:
    h, m, dh, dm = r.between(0, 23), r.between(0, 59), r.between(0, 9), r.between(1, 59)
    end = (h * 60 + m + dh * 60 + dm) % (24 * 60)
    return (
        f"A train leaves at {h:02d}:{m:02d} and the journey takes {dh} hours {dm} minutes. "
        "At what time (HH:MM, 24-hour clock) does it arrive?",
        {"type": "text", "value": f"{end // 60:02d}:{end % 60:02d}"},
    )


def _unit_price(r: Rng) -> tuple[str, Spec]:
    k, p, mult = r.between(2, 9), r.between(1, 20), r.between(2, 30)
    thing = r.choice(("pens", "apples", "stickers", "bolts", "candles", "postcards", "batteries"))
    return f"A shop sells {thing} at {k} for ${p}. How many dollars do {k * mult} {thing} cost?", integer(
        p * mult
    )


def _ratio(r: Rng) -> tuple[str, Spec]:
    a, b = r.sample(NAMES, 2)
    m, unit = r.between(2, 7), r.between(2, 40)
    thing = r.choice(("apples", "marbles", "stamps", "coins", "books", "shells"))
    word_m = {
        2: "twice",
        3: "three times",
        4: "four times",
        5: "five times",
        6: "six times",
        7: "seven times",
    }[m]
    return (
        f"{a} has {word_m} as many {thing} as {b}. Together they have {unit * (m + 1)} {thing}. "
        f"How many {thing} does {a} have?",
        integer(unit * m),
    )


def _weekday(r: Rng) -> tuple[str, Spec]:
    today, n = r.below(7), r.between(10, 1000)
    return (
        f"If today is {DAYS[today]}, what day of the week will it be {n} days from now?",
        choice(list(DAYS), DAYS[(today + n) % 7]),
    )


def _tank(r: Rng) -> tuple[str, Spec]:
    leak, net, minutes = r.between(1, 9), r.between(1, 12), r.between(5, 60)
    return (
        f"A {net * minutes}-litre tank starts empty. It fills at {leak + net} litres per minute and leaks "
        f"{leak} litre{'s' if leak > 1 else ''} per minute. After how many minutes is it full?",
        integer(minutes),
    )


def _consecutive(r: Rng) -> tuple[str, Spec]:
    count, low = r.choice((3, 4, 5)), r.between(-200, 2000)
    total = sum(range(low, low + count))
    return (
        f"{count} consecutive integers add up to {total}. What is the product of the smallest and the largest?",
        integer(low * (low + count - 1)),
    )


def _syllogism(r: Rng) -> tuple[str, Spec]:
    a, b, c = (word(r) + "s" for _ in range(3))
    valid = r.below(2) == 0
    second = f"all {b} are {c}" if valid else r.choice((f"some {b} are {c}", f"all {c} are {b}"))
    return (
        f"All {a} are {b} and {second}. Are all {a} necessarily {c}? Answer yes or no.",
        choice(["yes", "no"], "yes" if valid else "no"),
    )


def _boxes(r: Rng) -> tuple[str, Spec]:
    labels = r.sample("ABCDEFGHJKMNPQRSTUVWXYZ", 4)  # left to right
    clues = [f"Box {labels[i]} is immediately to the left of box {labels[i + 1]}." for i in range(3)]
    k = r.between(1, 4)
    ordinal = {1: "first", 2: "second", 3: "third", 4: "fourth"}[k]
    options = sorted(labels)
    return (
        " ".join(r.shuffled(clues))
        + f" Which box is {ordinal} from the left: {', '.join(options[:-1])} or {options[-1]}?",
        choice(options, labels[k - 1]),
    )


_INFER: tuple[Template, ...] = (
    _ordering, _train, _unit_price, _ratio, _weekday, _tank, _consecutive, _syllogism, _boxes,
)  # fmt: skip


def inference(seed: bytes) -> Item:
    """Multi-step inference with fresh names, numbers and invented words; nine forms: a chain of three
    comparisons among 4 of 50 names (3 relations, ask the most or least); train arrival (departure any
    minute, 0..9 h 1..59 min); unit price (k 2..9 for $1..20, ×2..30); ratio (×2..7, unit 2..40); weekday
    n 10..1000 days ahead; filling tank (leak 1..9, net 1..12 l/min, 5..60 min); 3, 4 or 5 consecutive
    integers from −200..2000; syllogism over invented words (valid or one of two invalid forms); four boxes
    from 23 letters linked by adjacency clues (ask position 1..4)."""
    r = Rng(seed, "inference@1")
    text, spec = r.choice(_INFER)(r)
    return item("capability", _GRADER, [_q(text)], {"answer": spec})


ARITHMETIC = register(Generator("arithmetic", 1, "capability", arithmetic, arithmetic.__doc__ or ""))
SEQUENCE = register(Generator("sequence", 1, "capability", sequence, sequence.__doc__ or ""))
INFERENCE = register(Generator("inference", 1, "capability", inference, inference.__doc__ or ""))
