"""Badges: deterministic bytes, honest greys for unknowns, escaped text, widths that grow with the text."""

from __future__ import annotations

import xml.etree.ElementTree as ET

from hypothesis import given
from hypothesis import strategies as st

from trustscore.pages import badge
from trustscore.pages.textwidth import DEFAULT_UNITS, UNITS, text_width

SVG = "{http://www.w3.org/2000/svg}"


def test_total_badge_says_grade_total_and_verified_mark() -> None:
    text = badge.for_total(716, "AA", verified=True)
    assert (text.label, text.message) == ("trustscore", "AA 716 \u2713")
    assert badge.for_total(716, "AA", verified=False).message == "AA 716"
    svg = ET.fromstring(badge.render(text))
    assert svg.get("role") == "img" and svg.get("aria-label") == "trustscore: AA 716 \u2713"
    assert svg.find(f"{SVG}title").text == "trustscore: AA 716 \u2713"  # type: ignore[union-attr]


def test_unknown_and_unrated_are_grey_never_a_low_colour() -> None:
    low = badge.for_total(0, "C", verified=False)
    for text in (
        badge.unknown(),
        badge.for_total(None, None, False),
        badge.for_dimension("economic", None, False),
    ):
        assert text.colour == badge.GREY != low.colour
        assert text.message.startswith(("unknown", "unrated"))
    assert badge.for_dimension("economic", 0.0, False).colour == low.colour  # a real zero is a real score


def test_colour_rises_with_the_score() -> None:
    order = [c for _, c in badge.COLOURS]
    shades = [badge.colour(s / 10) for s in range(0, 11)]
    assert [order.index(c) for c in shades] == sorted((order.index(c) for c in shades), reverse=True)


def test_rendering_is_deterministic_and_escapes_text() -> None:
    text = badge.BadgeText('<a&"b>', "</text><script>", badge.GREY)
    out = badge.render(text)
    assert out == badge.render(text)
    assert "<script>" not in out and "&lt;script&gt;" in out
    ET.fromstring(out)  # still well-formed XML


@given(st.text(max_size=40), st.text(max_size=40))
def test_any_text_gives_well_formed_svg_wide_enough(label: str, message: str) -> None:
    svg = ET.fromstring(badge.render(badge.BadgeText(label, message, badge.GREY)))  # controls dropped
    shown = ["".join(ch for ch in s if ch.isprintable()) for s in (label, message)]
    width = float(svg.get("width", "0"))
    assert width >= sum(text_width(s) for s in shown) + 4 * badge.PADDING - 0.2


def test_text_width_is_additive_and_uses_the_table() -> None:
    assert text_width("") == 0
    assert text_width("i") < text_width("m") < text_width("W")
    assert text_width("\u4e2d") == round(DEFAULT_UNITS * 11 / 2048, 1)  # unknown: a digit's width
    assert text_width("ab", 22) == round((UNITS["a"] + UNITS["b"]) * 22 / 2048, 1)


def test_a_dimension_badge_names_its_medal_in_words_and_a_medal_changes_the_bytes() -> None:
    plain = badge.for_dimension("capability", 91.0, verified=True)
    gold = badge.for_dimension("capability", 91.0, verified=True, medal="gold")
    assert (
        gold.message == "91/100 \u00b7 gold \u2713" and gold.colour == plain.colour
    )  # the word, not a colour
    assert badge.render(gold) != badge.render(plain)  # so the ETag (digest of the bytes) differs
    assert badge.render(gold) != badge.render(badge.for_dimension("capability", 91.0, True, medal="silver"))
    label = ET.fromstring(badge.render(gold)).get("aria-label")
    assert label == "trustscore capability: 91/100 \u00b7 gold \u2713"
    # No score is unknown, medal or not (a medal needs a score; never drawn on an unknown).
    assert badge.for_dimension("capability", None, False, medal="gold").message == "unknown"
