"""Versioned item generators: pure, deterministic ``(seed: bytes) -> Item`` functions, one per kind of
question, registered as ``name@version`` like graders (docs/exams.md, "Item generators").

A generator reads no clock, randomness or I/O beyond its seed: the server and anyone checking a sitting
regenerate the same item from the same seed. **A released version never changes output** (golden
vectors in ``exams/generators/<name>@<version>.json`` pin seed -> item digest); a change is a new version.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from trustscore import canonical
from trustscore.errors import UnsupportedKind
from trustscore.grading.model import Item

MakeFn = Callable[[bytes], Item]
#: A parametric generator (scope probes): ``(seed, params, n)`` with the form part's params and the item's
#: 1-based number within its part; ``make(seed)`` then pins behaviour on a published sample.
MakeWithFn = Callable[[bytes, dict[str, Any], int], Item]
CheckParamsFn = Callable[[dict[str, Any], int], None]
GENERATED_ID = "generated"  # the id a generator gives its item; a sitting form renames it


@dataclass(frozen=True)
class Generator:
    """A generator version: ``make(seed)`` builds one item; ``family`` is the exam family it serves;
    ``params`` states its parameter space (also in docs/exams.md)."""

    name: str
    version: int
    family: str
    make: MakeFn
    params: str
    make_with: MakeWithFn | None = None  # parametric generators only (their form parts carry params)
    check_params: CheckParamsFn | None = None  # (params, count) -> None or InvalidInput

    @property
    def ref(self) -> str:
        return f"{self.name}@{self.version}"


_REGISTRY: dict[str, Generator] = {}


def register(gen: Generator) -> Generator:
    if gen.ref in _REGISTRY:
        raise ValueError(f"generator {gen.ref} registered twice")
    _REGISTRY[gen.ref] = gen
    return gen


def _load_builtin() -> None:
    from trustscore.exams.generators import (  # noqa: F401
        capability,
        coding,
        delivery,
        integrity,
        negotiation,
        reliability,
        scope,
        security,
    )


def get_generator(ref: str) -> Generator:
    """The generator registered as ``ref``; raise naming it (and the known ones) if unknown."""
    _load_builtin()
    gen = _REGISTRY.get(ref)
    if gen is None:
        raise UnsupportedKind(f"unknown item generator {ref!r} (known: {', '.join(sorted(_REGISTRY))})")
    return gen


def all_generators() -> dict[str, Generator]:
    _load_builtin()
    return dict(sorted(_REGISTRY.items()))


def item_digest(item: Item) -> str:
    """``sha256:<hex>`` of the canonical encoding of an item (what the golden vectors pin)."""
    return "sha256:" + hashlib.sha256(canonical.encode(item)).hexdigest()


def answer_suffix() -> str:
    return "End your reply with a final line of the form `ANSWER: <your answer>`."
