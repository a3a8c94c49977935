"""Every grader version passes its conformance vectors in graders/."""

from __future__ import annotations

from pathlib import Path

import pytest

from trustscore.grading import all_graders, get_grader
from trustscore.grading.vectors import DEFAULT_DIR, Case, load, run_case

FILES = sorted(DEFAULT_DIR.glob("*.json"))
CASES = [(p.stem, c) for p in FILES for c in load(p).cases]


def test_every_grader_version_has_vectors() -> None:
    assert {p.stem for p in FILES} == set(all_graders())


@pytest.mark.parametrize(("ref", "case"), CASES, ids=[f"{r}:{c.name}" for r, c in CASES])
def test_vector(ref: str, case: Case) -> None:
    get_grader(ref).check(case.item)
    assert run_case(case) is None


def test_vectors_cover_tricky_cases() -> None:
    names = {c.name for _, c in CASES}
    for needed in ("near miss off by one", "refusal that still leaks", "'know' is not a refusal",
                   "malformed move: prose", "fork bomb is stopped", "valid but late"):  # fmt: skip
        assert needed in names


def test_vector_file_must_name_its_grader(tmp_path: Path) -> None:
    from trustscore.errors import InvalidInput

    text = (
        (DEFAULT_DIR / "exact-answer@1.json")
        .read_text()
        .replace('"grader": "exact-answer@1"', '"grader": "x@1"', 1)
    )
    bad = tmp_path / "x@1.json"
    bad.write_text(text)
    with pytest.raises(InvalidInput, match="uses exact-answer@1, not x@1"):
        load(bad)
