"""Sitting forms: which generators make a fresh instance of an exam, and how a sitting's seed becomes
its items (docs/exams.md, "Sittings").

A form is a list of parts ``(prefix, generator, count)``; the sitting-open statement carries the whole
form, so a sitting can be regenerated from the log alone. Item ``prefix-NNN`` is made by its generator
from ``SHA-256("trustscore-sitting-item/v1" 0x00 seed 0x00 item_id)``.

The seed is ``SHA-256("trustscore-sitting-seed/v1" 0x00 secret root request_sha256)``: ``secret`` is
the server's 32 random bytes committed to (by SHA-256) in the sitting-open statement and revealed when
the sitting closes; ``root`` is the log's Merkle root at the size right after the sitting-open entry;
``request_sha256`` is the hash of the agent's signed request. Pure.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import Any

import msgspec

from trustscore import canonical
from trustscore.errors import InvalidInput, NotFound
from trustscore.exams.generators import get_generator
from trustscore.exams.model import ExamFile, ExamSet
from trustscore.grading.model import Item
from trustscore.kinds.sittings import FormPart

MAX_FORM_ITEMS = 200


#: The published forms, keyed by the exam they stand in for. A form never changes once published; a
#: change is a new exam version (with a new form) or a new generator version.
FORMS: dict[str, list[FormPart]] = {
    "capability@1": [
        FormPart("code", "python-code@1", 4),
        FormPart("arith", "arithmetic@1", 4),
        FormPart("seq", "sequence@1", 4),
        FormPart("infer", "inference@1", 4),
    ],
    "reliability@1": [FormPart("rel", "repeat-check@1", 6)],
    "delivery@1": [FormPart("del", "json-record@1", 6)],
    "security@1": [FormPart("sec", "injection-probe@1", 12)],
    "negotiation@1": [FormPart("neg", "price-haggle@1", 10)],
    "integrity@1": [FormPart("int", "honesty-probe@1", 12)],
}


def form_for(exam: str) -> list[FormPart]:
    form = FORMS.get(exam)
    if form is None:
        raise NotFound(f"there is no sitting form for {exam!r} (forms: {', '.join(sorted(FORMS))})")
    return form


def check_form(form: list[FormPart]) -> None:
    """Every generator known, prefixes distinct ``[a-z]{1,16}``, 1..MAX_FORM_ITEMS items in all."""
    prefixes = [p.prefix for p in form]
    if len(set(prefixes)) != len(prefixes) or not all(p.isascii() and p.isalpha() and p.islower()
                                                       and len(p) <= 16 for p in prefixes):  # fmt: skip
        raise InvalidInput("form: prefixes must be distinct, 1..16 lower-case letters")
    if not form or not all(p.count >= 1 for p in form) or sum(p.count for p in form) > MAX_FORM_ITEMS:
        raise InvalidInput(f"form: needs 1..{MAX_FORM_ITEMS} items, each part at least one")
    for p in form:
        gen = get_generator(p.generator)
        if (p.params is None) != (gen.make_with is None):
            raise InvalidInput(f"form: {p.generator} {'needs' if p.params is None else 'takes no'} params")
        if p.params is not None and gen.check_params is not None:
            gen.check_params(p.params, p.count)


def new_secret() -> bytes:
    return secrets.token_bytes(32)


def commitment(secret: bytes) -> str:
    """The hex SHA-256 the sitting-open statement publishes."""
    return hashlib.sha256(secret).hexdigest()


def sitting_seed(secret: bytes, root: bytes, request_sha256: bytes) -> bytes:
    if len(secret) != 32 or len(root) != 32 or len(request_sha256) != 32:
        raise InvalidInput("secret, root and request hash must be 32 bytes each")
    return hashlib.sha256(b"trustscore-sitting-seed/v1\x00" + secret + root + request_sha256).digest()


def item_seed(seed: bytes, item_id: str) -> bytes:
    return hashlib.sha256(b"trustscore-sitting-item/v1\x00" + seed + b"\x00" + item_id.encode()).digest()


def instantiate(form: list[FormPart], seed: bytes) -> list[Item]:
    """The items of a sitting of ``form`` with ``seed``, in form order."""
    check_form(form)
    out = []
    for part in form:
        gen = get_generator(part.generator)
        for n in range(1, part.count + 1):
            item_id = f"{part.prefix}-{n:03d}"
            s = item_seed(seed, item_id)
            made = (
                gen.make(s)
                if gen.make_with is None or part.params is None
                else gen.make_with(s, part.params, n)
            )
            out.append(msgspec.structs.replace(made, id=item_id))
    return out


def items_digest(items: list[Item]) -> str:
    """``sha256:<hex>`` of the canonical encoding of a sitting's items (published at close)."""
    return "sha256:" + hashlib.sha256(canonical.encode(items)).hexdigest()


def sitting_exam(base: ExamSet, items: list[Item]) -> ExamSet:
    """An exam set holding a sitting's items, with ``base``'s name, instructions and timeouts; its digest
    is :func:`items_digest` (so it is never mistaken for a published file)."""
    f = base.file
    file = ExamFile(
        schema_version=f.schema_version,
        name=f.name,
        version=f.version,
        dimension=f.dimension,
        tier="private",
        description=f.description,
        instructions=f.instructions,
        items=items,
        default_timeout_ms=f.default_timeout_ms,
    )
    return ExamSet(file, items_digest(items))


# The scope-honesty exam (SCOPE_EXAM): its form is built per sitting from the agent's declarations (the
# sitting-open statement carries it, params included, so the sitting still regenerates from the log alone).


def scope_form(declarations: Any, non_capabilities: list[str]) -> list[FormPart]:
    """The form of a ``scope@1`` sitting for ``declarations`` (a list of ``CapabilityDeclaration``)."""
    from trustscore.exams.generators.scope import REF_V2, scope_form_params

    form = [
        FormPart(prefix, REF_V2, count, params)
        for prefix, params, count in scope_form_params(declarations, non_capabilities)
    ]
    check_form(form)
    return form
