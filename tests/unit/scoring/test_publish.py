"""Published numbers are rounded as documented (issue #18): 10^-6, the attestation's fixed point, in one
place for the API and ``trustscore score``; the engine's own values stay exact."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from hypothesis import given
from hypothesis import strategies as st

from trustscore.api.public_routes import encode_rating
from trustscore.attestations.rating import micros
from trustscore.reverify.status import summarize
from trustscore.scoring import Weights, load_weights, score_agents
from trustscore.scoring.publish import number, published
from trustscore.services.ratings import RatedAgent

from .conftest import AT, WEIGHTS, item
from .test_scoring_cli import run, write


def test_84_99999999999997_is_published_as_85() -> None:
    assert number(84.99999999999997) == 85.0
    assert msgspec.json.encode(number(84.99999999999997)) == b"85.0"
    assert msgspec.json.encode(number(0.10500000000000001)) == b"0.105"
    assert msgspec.json.encode(number(-1e-12)) == b"0.0"  # never -0.0
    assert number(54.90313970287117) == 54.903140


@given(st.floats(min_value=0, max_value=1e6, allow_nan=False))
def test_published_number_is_its_attested_integer(x: float) -> None:
    """A published number is the attestation's integer / 10^6, shortest form, and rounding is stable."""
    p = number(x)
    assert micros(p) == micros(x)
    assert number(p) == p
    text = repr(p)
    assert len(text.split(".")[1]) <= 6 if "e" not in text else p < 1e-4


def test_engine_stays_exact_and_publication_rounds(baseline: Weights) -> None:
    """The engine keeps 10.000000000000002 (baseline-v0.3 is reproduced exactly); publication rounds it,
    and every float of a trustscore-v2 rating (scores, intervals, n_eff, confidence) alike."""
    [rating] = score_agents(
        [item(source="real", value=0.1), item(source="simulation", value=0.1)], None, baseline, AT
    )
    assert rating.dimensions["capability"] == 10.000000000000002
    assert published(rating).dimensions["capability"] == 10.0
    assert published(rating).total == rating.total and published(rating).n == rating.n
    items = [
        item(source=s, value=0.1, issuer=f"i{k}")
        for k, s in enumerate(["real", "simulation", "real", "real"])
    ]
    [r2] = score_agents(items, None, load_weights(WEIGHTS / "trustscore-v2.toml"), AT)
    out = json.loads(msgspec.json.encode(published(r2)))
    floats: list[float] = []

    def collect(node: object) -> None:
        if isinstance(node, float):
            floats.append(node)
        elif isinstance(node, dict):
            for v in node.values():
                collect(v)
        elif isinstance(node, list):
            for v in node:
                collect(v)

    collect(out)
    assert len(floats) >= 6
    assert all(f == round(f, 6) for f in floats), floats
    assert out["uncertainty"]["dimensions"]["capability"]["interval"] == [1.003881, 54.90314]


def test_score_cli_prints_published_numbers(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """``trustscore score`` printed 0.10500000000000001 and 10.000000000000002; it rounds like the API."""
    lines: list[dict[str, object] | str] = [
        {
            "agent": "a",
            "dimension": "capability",
            "source": s,
            "value": 0.1,
            "at": "2026-11-29T00:00:00Z",
            "issuer": f"i{k}",
        }
        for k, s in enumerate(["real", "simulation", "real", "real"])
    ]
    evidence = write(tmp_path / "e.jsonl", lines)
    assert (
        run(
            "--weights",
            str(WEIGHTS / "baseline-v0.3.toml"),
            "--evidence",
            str(evidence),
            "--at",
            "2026-11-30T00:00:00Z",
        )
        == 0
    )
    out = capsys.readouterr().out
    assert '"confidence":0.105,' in out and '"capability":10.0' in out, out


def test_api_rating_body_equals_score_cli_numbers(baseline: Weights) -> None:
    """The API's rating body goes through the same rounding as ``trustscore score``: same numbers."""
    items = [
        item(source=s, value=0.1, issuer=f"i{k}")
        for k, s in enumerate(["real", "simulation", "real", "real"])
    ]
    [rating] = score_agents(items, None, baseline, AT)
    body = json.loads(
        encode_rating(RatedAgent(rating, AT, 4), 4, summarize([], endpoint=None, now=AT, interval_s=0))
    )
    offline = json.loads(msgspec.json.encode(published(rating)))
    assert body["confidence"] == offline["confidence"] == 0.105
    assert {k: v["score"] for k, v in body["dimensions"].items()} == offline["dimensions"]
    assert body["coverage"] == offline["coverage"] and body["total"] == offline["total"]
