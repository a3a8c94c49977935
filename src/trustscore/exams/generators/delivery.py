"""``json-record@1``: a JSON deliverable against a freshly generated schema (``json-deliverable@1``)."""

from __future__ import annotations

from typing import Any

from trustscore.exams.generators import Generator, register
from trustscore.exams.generators.common import ALNUM, LOWER, item, word
from trustscore.exams.generators.rng import Rng
from trustscore.grading.model import Item

_ENTITIES = ("shipment", "booking", "invoice", "sensor reading", "support ticket", "recipe", "lease",
             "flight", "purchase order", "lab sample", "library loan", "job posting")  # fmt: skip


def _field(r: Rng, name: str) -> tuple[dict[str, Any], str]:
    kind = r.below(6)
    if kind == 0:
        lo = r.between(-100, 500)
        hi = lo + r.between(1, 1000)
        return {"type": "integer", "minimum": lo, "maximum": hi}, f"`{name}` (integer {lo}..{hi})"
    if kind == 1:
        prefix, digits = r.token(ALNUM[:24], r.between(2, 4)), r.between(3, 6)
        example = prefix + "-" + "0" * (digits - 1) + "7"
        return (
            {"type": "string", "pattern": f"^{prefix}-[0-9]{{{digits}}}$"},
            f"`{name}` (string like {example}: {prefix}, a hyphen and exactly {digits} digits)",
        )
    if kind == 2:
        options = sorted({word(r, 2) for _ in range(r.between(3, 5))})
        return {"enum": options}, f"`{name}` (one of {', '.join(options)})"
    if kind == 3:
        value = r.between(1, 99)
        return {"const": value}, f"`{name}` (exactly {value})"
    if kind == 4:
        n = r.between(1, 5)
        return (
            {"type": "array", "minItems": n, "items": {"type": "string", "minLength": 1}},
            f"`{name}` (array of at least {n} non-empty strings)",
        )
    lo, hi = r.between(1, 5), r.between(6, 40)
    return {"type": "string", "minLength": lo, "maxLength": hi}, f"`{name}` (string of {lo}..{hi} characters)"


def json_record(seed: bytes) -> Item:
    """A JSON object for one of 12 entities with 3..6 fields named from invented syllables (plus a
    random letter); each field is an integer range (min −100..500, width 1..1000), a patterned id (prefix
    2..4 of 24 letters, 3..6 digits), an enum of 3..5 invented words, a const 1..99, an array of ≥ 1..5
    strings or a string of bounded length; all required, no other properties; budget 10 s."""
    r = Rng(seed, "json-record@1")
    entity = r.choice(_ENTITIES)
    names = sorted({word(r, 2) + "_" + r.choice(LOWER) for _ in range(r.between(3, 6))})
    props: dict[str, Any] = {}
    described = []
    for name in names:
        schema, text = _field(r, name)
        props[name] = schema
        described.append(text)
    schema = {"type": "object", "properties": props, "required": names, "additionalProperties": False}
    prompt = (
        f"Deliver a JSON object for a {entity} with exactly these fields: {'; '.join(described)}. "
        "Reply with the JSON value only."
    )
    return item("delivery", "json-deliverable@1", [prompt], {"schema": schema, "budget_ms": 10_000})


JSON_RECORD = register(Generator("json-record", 1, "delivery", json_record, json_record.__doc__ or ""))
