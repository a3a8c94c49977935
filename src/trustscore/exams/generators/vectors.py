"""Golden vectors of the item generators: ``exams/generators/<name>@<version>.json`` pins, for fixed
seeds, the digest of the item each released generator makes (and one whole item, to read), so a
published generator version never changes output. ``python -m trustscore.exams.generators.vectors``
writes the files of generators that have none (it never rewrites an existing one)."""

from __future__ import annotations

import hashlib
import sys
from pathlib import Path
from typing import Any

import msgspec

from trustscore import resources
from trustscore.exams.generators import Generator, all_generators, item_digest

DIR = resources.path("exams", "generators")
SEEDS = 32


def seeds() -> list[bytes]:
    return [hashlib.sha256(f"trustscore-generator-vector-{i}".encode()).digest()[:16] for i in range(SEEDS)]


def vectors_of(gen: Generator) -> dict[str, Any]:
    rows = [{"seed": s.hex(), "item_digest": item_digest(gen.make(s))} for s in seeds()]
    return {"generator": gen.ref, "sample": msgspec.to_builtins(gen.make(seeds()[0])), "vectors": rows}


def path_of(ref: str) -> Path:
    return DIR / f"{ref}.json"


def main() -> int:
    DIR.mkdir(parents=True, exist_ok=True)
    for ref, gen in all_generators().items():
        path = path_of(ref)
        if path.exists():
            continue
        path.write_bytes(msgspec.json.format(msgspec.json.encode(vectors_of(gen)), indent=1) + b"\n")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
