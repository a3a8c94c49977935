"""Conformance vectors: ``graders/<name>@<version>.json`` holds (item, response, expected grade) cases.

Every grader version has a file; the test suite runs them all, and another implementation of the
graders can run the same files to show it marks identically.
"""

from __future__ import annotations

from pathlib import Path

import msgspec

from trustscore import resources
from trustscore.errors import InvalidInput
from trustscore.grading.model import Item, Response, Result
from trustscore.grading.registry import grade_item

DEFAULT_DIR = resources.path("graders")


class Expected(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    value: int
    result: Result


class Case(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    name: str
    item: Item
    response: Response
    expected: Expected


class VectorFile(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    grader: str
    cases: list[Case]


def load(path: Path) -> VectorFile:
    try:
        vf = msgspec.json.decode(path.read_bytes(), type=VectorFile)
    except (OSError, msgspec.DecodeError) as exc:
        raise InvalidInput(f"{path}: not a grader vector file: {exc}") from exc
    for case in vf.cases:
        if case.item.grader != vf.grader:
            raise InvalidInput(f"{path}: case {case.name!r} uses {case.item.grader}, not {vf.grader}")
    return vf


def run_case(case: Case) -> str | None:
    """None if the grader gives the expected grade, else a message saying what it gave instead."""
    got = grade_item(case.item, case.response)
    if (got.value, got.result) == (case.expected.value, case.expected.result):
        return None
    return (
        f"{case.item.grader} {case.name!r}: expected {case.expected.value} {case.expected.result}, "
        f"got {got.value} {got.result} ({got.detail})"
    )
