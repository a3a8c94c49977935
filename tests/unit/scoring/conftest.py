"""Fixtures for the scoring tests: the released weights, variants of them, and terse builders."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest

from trustscore.scoring import (
    EvidenceItem,
    Rating,
    Snapshot,
    Weights,
    load_weights,
    parse_weights,
    score_agents,
)

ROOT = Path(__file__).resolve().parents[3]
WEIGHTS = ROOT / "weights"
AT = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)


def days_ago(days: float) -> dt.datetime:
    return AT - dt.timedelta(days=days)


def item(agent: str = "a", dimension: str = "capability", source: str = "real", **kw: Any) -> EvidenceItem:
    """Evidence with defaults: value 1.0 unless a result is given, one day old."""
    if "value" not in kw and "result" not in kw:
        kw["value"] = 1.0
    kw.setdefault("at", days_ago(1))
    return EvidenceItem(agent=agent, dimension=dimension, source=source, **kw)


def snap(total: int | None, days: float, version: str = "baseline-v0.3", agent: str = "a") -> Snapshot:
    return Snapshot(agent=agent, at=days_ago(days), total=total, model_version=version)


def rate(
    items: list[EvidenceItem], weights: Weights, snapshots: list[Snapshot] | None = None, at: dt.datetime = AT
) -> dict[str, Rating]:
    return {r.agent: r for r in score_agents(items, snapshots, weights, at)}


def variant(name: str, replacements: dict[str, str], base: str = "trustscore-v1") -> Weights:
    """A test model: a released file with some lines replaced and a model_version of its own."""
    text = (WEIGHTS / f"{base}.toml").read_text()
    text = text.replace(f'model_version = "{base}"', f'model_version = "{name}"')
    for old, new in replacements.items():
        assert old in text, old
        text = text.replace(old, new)
    return parse_weights(text.encode())


@pytest.fixture(scope="session")
def baseline() -> Weights:
    return load_weights(WEIGHTS / "baseline-v0.3.toml")


@pytest.fixture(scope="session")
def model() -> Weights:
    return load_weights(WEIGHTS / "trustscore-v1.toml")


@pytest.fixture(scope="session")
def open_model() -> Weights:
    """trustscore-v1 without the suppression floor, so small hand-computed cases keep their numbers."""
    return variant("test-open", {"min_effective_n = 3.0": "min_effective_n = 0.0"})
