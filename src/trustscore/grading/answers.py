"""Exact parsing of a final answer: the last ``ANSWER: ...`` line, parsed by the item's answer spec.

Answers are compared as parsed values (an integer, an exact rational, a sequence of integers, one of a
closed set of choices or normalised text), never by searching for a substring of the reply. A reply
without an ``ANSWER:`` line is judged on its last non-empty line.

Answer specs (item arguments): ``{"type": "integer", "value": 42}``, ``{"type": "number", "value":
"3/4"}`` (exact: ``0.75`` and ``3/4`` are equal), ``{"type": "sequence", "value": [1, 2]}``,
``{"type": "choice", "options": ["yes", "no"], "value": "yes"}``, ``{"type": "text", "value": "Paris",
"accept": ["paris, france"]}``. ``value`` may be omitted where only the parse matters (agreement).
"""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Any

ANSWER_LINE = _ANSWER = re.compile(
    r"^[*_`#>\s]*(?:final\s+)?answer[*_`\s]*[:=]\s*(?P<rest>.*)$", re.IGNORECASE
)
_INT = re.compile(r"^[+-]?(?:\d{1,3}(?:,\d{3})+|\d+)$")
_DEC = re.compile(r"^[+-]?(?:\d+\.\d*|\.\d+|\d+)$")
_FRAC = re.compile(r"^[+-]?\d+\s*/\s*\d+$")
SPEC_TYPES = ("integer", "number", "sequence", "choice", "text")


class Unparseable(ValueError):
    """The reply has no final answer of the expected type."""


def final_answer(text: str) -> str:
    """The text of the final answer: after the last ``ANSWER:`` line, else the last non-empty line."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    if not lines:
        raise Unparseable("empty reply")
    for line in reversed(lines):
        m = _ANSWER.match(line)
        if m:
            return _strip_decoration(m.group("rest"))
    return _strip_decoration(lines[-1])


def strip_decoration(text: str) -> str:
    """The answer text without markdown decoration, a trailing full stop, or a typographic minus."""
    return _strip_decoration(text)


def is_number(text: str) -> bool:
    """Whether ``text`` is a number (integer, decimal or fraction) and nothing else."""
    try:
        parse_number(text)
    except Unparseable:
        return False
    return True


def _strip_decoration(text: str) -> str:
    text = text.strip().strip("*_`").strip()
    if text.endswith("."):
        text = text[:-1].rstrip()
    return text.replace("\u2212", "-")


def parse_integer(text: str) -> int:
    t = text.replace(" ", "")
    if not _INT.match(t):
        raise Unparseable(f"{text!r} is not an integer")
    return int(t.replace(",", ""))


def parse_number(text: str) -> Fraction:
    t = text.replace(" ", "")
    if _INT.match(t):
        return Fraction(int(t.replace(",", "")))
    if _DEC.match(t) or _FRAC.match(t):
        try:
            return Fraction(t)
        except (ValueError, ZeroDivisionError) as exc:
            raise Unparseable(f"{text!r} is not a number") from exc
    raise Unparseable(f"{text!r} is not a number")


def parse_sequence(text: str) -> tuple[int, ...]:
    t = text.strip()
    if (t.startswith("[") and t.endswith("]")) or (t.startswith("(") and t.endswith(")")):
        t = t[1:-1]
    parts = [p for p in re.split(r"\s*,\s*|\s+", t.strip()) if p]
    if not parts:
        raise Unparseable("empty sequence")
    try:
        return tuple(parse_integer(p) for p in parts)
    except Unparseable as exc:
        raise Unparseable(f"{text!r} is not a sequence of integers") from exc


def normalise_text(text: str) -> str:
    t = re.sub(r"\s+", " ", text.casefold()).strip()
    return t.strip(" .!\"'")


def parse_choice(text: str, options: list[str]) -> str:
    t = normalise_text(text)
    for option in options:
        if normalise_text(option) == t:
            return option
    raise Unparseable(f"{text!r} is not one of {options}")


def parse(spec: dict[str, Any], text: str) -> Any:
    """Parse the final answer of ``text`` by ``spec``; the result is hashable and compares exactly."""
    answer = final_answer(text)
    kind = spec["type"]
    if kind == "integer":
        return parse_integer(answer)
    if kind == "number":
        return parse_number(answer)
    if kind == "sequence":
        return parse_sequence(answer)
    if kind == "choice":
        return parse_choice(answer, spec["options"])
    if kind == "text":
        return normalise_text(answer)
    raise AssertionError(f"unchecked answer spec type {kind!r}")


def expected(spec: dict[str, Any]) -> Any:
    """The parsed expected value of a spec (raises KeyError when it has none)."""
    value = spec["value"]
    kind = spec["type"]
    if kind == "integer":
        return int(value)
    if kind == "number":
        return Fraction(str(value))
    if kind == "sequence":
        return tuple(int(v) for v in value)
    if kind == "choice":
        return parse_choice(str(value), spec["options"])
    return normalise_text(str(value))


def accepted(spec: dict[str, Any]) -> set[Any]:
    values = {expected(spec)}
    if spec["type"] == "text":
        values |= {normalise_text(a) for a in spec.get("accept", [])}
    return values


def check_spec(spec: object, *, need_value: bool) -> str | None:
    """Why ``spec`` is not a valid answer spec, or None if it is."""
    if not isinstance(spec, dict) or spec.get("type") not in SPEC_TYPES:
        return f"answer spec must be an object with type one of {SPEC_TYPES}"
    allowed = {"type", "value", "options", "accept"}
    if set(spec) - allowed:
        return f"unknown answer spec keys {sorted(set(spec) - allowed)}"
    if spec["type"] == "choice" and not (
        isinstance(spec.get("options"), list)
        and spec["options"]
        and all(isinstance(o, str) for o in spec["options"])
    ):
        return "a choice spec needs a non-empty list of string options"
    if "value" not in spec:
        return "answer spec needs a value" if need_value else None
    try:
        expected(spec)
    except (ValueError, TypeError, ZeroDivisionError, Unparseable):
        return f"answer spec value {spec['value']!r} does not parse as {spec['type']}"
    return None


def show(value: Any) -> str:
    if isinstance(value, tuple):
        return ", ".join(str(v) for v in value)
    return str(value)
