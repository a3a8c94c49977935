"""Medals in plain words: every reason the scoring can give has a sentence (none shown as a raw code)."""

from __future__ import annotations

import pytest

from trustscore import resources
from trustscore.pages import medals as words
from trustscore.scoring import medals
from trustscore.scoring.weights import load_weights

WEIGHTS = resources.path("weights")
RULES = medals.find_medal_rules(WEIGHTS, load_weights(WEIGHTS / "trustscore-v2.toml"))  # the released rules


def entry(reason: str | None, real_n: int = 5, freshness: float | None = 1.0) -> medals.DimensionMedal:
    return medals.DimensionMedal(medal=None, real_n=real_n, freshness=freshness, reason=reason)


@pytest.mark.parametrize(
    ("e", "text"),
    [
        (entry(medals.NO_SCORE, 0, None), "no score in this dimension yet (unknown, not low)"),
        (entry(medals.TOO_FEW, 1), "1 real evidence item, 3 needed"),
        (entry(medals.TOO_FEW, 2), "2 real evidence items, 3 needed"),
        (
            entry(medals.STALE, 4, 0.39685),
            "too old (freshness 0.40, at least 0.5 needed; it halves every 30 days)",
        ),
        (entry(medals.BELOW), "the score is below bronze (65)"),  # integrity's bronze
        (entry("a_new_reason"), "a new reason"),  # a reason the pages do not know yet is shown, not hidden
    ],
)
def test_every_reason_reads_as_words(e: medals.DimensionMedal, text: str) -> None:
    assert RULES is not None
    said = words.why_none(e, RULES.spec, "integrity")
    assert text in said and "_" not in said


def test_every_reason_of_the_scoring_has_its_own_sentence() -> None:
    assert RULES is not None
    said = {words.why_none(entry(r), RULES.spec, "capability") for r in medals.REASONS}
    assert len(said) == len(medals.REASONS) and not said & {r.replace("_", " ") for r in medals.REASONS}


def test_a_held_medal_needs_no_reason_and_thresholds_read_lowest_first() -> None:
    assert RULES is not None
    held = medals.DimensionMedal(medal="gold", real_n=9, freshness=1.0, reason=None)
    assert words.why_none(held, RULES.spec, "economic") == ""
    assert words.thresholds(RULES.spec, "economic") == "bronze 70 \u00b7 silver 85 \u00b7 gold 93"
