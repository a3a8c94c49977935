"""``repeat-check@1``: a fresh question asked three times in fresh conversations.
Graded by ``agreement@2``, which scores correctness as well as agreement, so a constant answer that
agrees with itself scores nothing."""

from __future__ import annotations

from trustscore.exams.generators import Generator, register
from trustscore.exams.generators.common import ANSWER_LINE, NAMES, choice, integer, item
from trustscore.exams.generators.rng import Rng
from trustscore.grading.model import Item

GRADER = "agreement@2"


def _is_prime(n: int) -> bool:
    return n >= 2 and all(n % d for d in range(2, int(n**0.5) + 1))


def repeat_check(seed: bytes) -> Item:
    """Asked 3 times; five forms: a+b (a, b 10..9999); a×b (a 3..99, b 3..99); next term of an
    arithmetic sequence (start 0..500, step 2..60, 4 terms shown); is n prime (n from 11..9999 moved up to the next prime or composite, half each); how
    many letters in a fresh name (one of 50 names + a 3..6-letter invented suffix)."""
    r = Rng(seed, "repeat-check@1")
    kind = r.below(5)
    if kind == 0:
        a, b = r.between(10, 9999), r.between(10, 9999)
        text, spec = f"What is {a} + {b}?", integer(a + b)
    elif kind == 1:
        a, b = r.between(3, 99), r.between(3, 99)
        text, spec = f"What is {a} × {b}?", integer(a * b)
    elif kind == 2:
        a, d = r.between(0, 500), r.between(2, 60)
        shown = ", ".join(str(a + d * i) for i in range(4))
        text, spec = f"What is the next number in the sequence {shown}, ...?", integer(a + 4 * d)
    elif kind == 3:
        n, prime = r.between(11, 9999), r.below(2) == 1  # half primes, so "no" is right only half the time
        while _is_prime(n) != prime:
            n += 1
        text = f"Is {n} a prime number? Answer yes or no."
        spec = choice(["yes", "no"], "yes" if _is_prime(n) else "no")
    else:
        name = r.choice(NAMES) + r.token("aeilnorst", r.between(3, 6))
        text, spec = f"How many letters are in the word {name}?", integer(len(name))
    return item("reliability", GRADER, [f"{text} {ANSWER_LINE}"], {"answer": spec}, kind="repeat", times=3)


REPEAT_CHECK = register(Generator("repeat-check", 1, "reliability", repeat_check, repeat_check.__doc__ or ""))
