"""Shields-style badge SVGs: a grey label box and a coloured message box, sized by estimated text width.

A badge never shows an unknown as a low value: an agent without a score, or one the bureau has never
seen, gets a grey badge saying so. Everything here is a pure function of its arguments, so the same
rating always gives the same bytes (and the same ETag).
"""

from __future__ import annotations

from dataclasses import dataclass
from xml.sax.saxutils import escape

from trustscore.pages.textwidth import text_width

GREY = "#767676"  # unknown / unrated: neutral, never a "bad" colour
LABEL_GREY = "#555"
VERIFIED = "\u2713"  # ✓ after the value when the agent's endpoint re-verified its answers
# (lowest share of the scale reached, colour), best first: shields' brightgreen .. red
COLOURS = ((0.8, "#2e7d10"), (0.6, "#4f7a00"), (0.4, "#7a6a00"), (0.2, "#b34700"), (0.0, "#b3261e"))
PADDING = 6  # pixels each side of a text


@dataclass(frozen=True)
class BadgeText:
    """What a badge says: ``label: message`` on a ``colour`` message box."""

    label: str
    message: str
    colour: str


def colour(share: float) -> str:
    """The message colour of a value at ``share`` (0..1) of its scale."""
    return next(c for floor, c in COLOURS if share >= floor)


def label_for(dimension: str | None) -> str:
    return "trustscore" if dimension is None else f"trustscore {dimension}"


def unknown(dimension: str | None = None) -> BadgeText:
    """The badge of an agent the bureau has no card for."""
    return BadgeText(label_for(dimension), "unknown", GREY)


def for_total(total: int | None, grade: str | None, verified: bool, scale: float = 1000.0) -> BadgeText:
    """The total and grade (``unrated`` when the total is null), with the verified mark."""
    mark = f" {VERIFIED}" if verified else ""
    if total is None or grade is None:
        return BadgeText(label_for(None), f"unrated{mark}", GREY)
    return BadgeText(label_for(None), f"{grade} {total}{mark}", colour(total / scale))


def for_dimension(dimension: str, score: float | None, verified: bool, medal: str | None = None) -> BadgeText:
    """One dimension's score out of 100 (``unknown`` when null), its medal in words when it holds one
    (``91/100 · gold``: text, not a colour), with the verified mark."""
    mark = f" {VERIFIED}" if verified else ""
    if score is None:
        return BadgeText(label_for(dimension), f"unknown{mark}", GREY)
    held = f" \u00b7 {medal}" if medal else ""
    return BadgeText(label_for(dimension), f"{score:.0f}/100{held}{mark}", colour(score / 100))


def _num(x: float) -> str:
    return f"{x:.1f}".removesuffix(".0")


def _printable(s: str) -> str:
    """``s`` without the characters XML cannot carry (controls) or a badge should not show."""
    return "".join(ch for ch in s if ch.isprintable())


def render(text: BadgeText) -> str:
    """The badge SVG (20 px high, flat with a faint gradient), with a title for screen readers."""
    text = BadgeText(_printable(text.label), _printable(text.message), text.colour)
    lw = text_width(text.label) + 2 * PADDING
    mw = text_width(text.message) + 2 * PADDING
    w = lw + mw
    label, message = escape(text.label), escape(text.message)
    spoken = escape(f"{text.label}: {text.message}", {'"': "&quot;"})
    ws, lws, mws = _num(w), _num(lw), _num(mw)
    lx, mx = _num(lw / 2), _num(lw + mw / 2)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{ws}" height="20" role="img" '
        f'aria-label="{spoken}"><title>{spoken}</title>'
        '<linearGradient id="s" x2="0" y2="100%"><stop offset="0" stop-color="#bbb" stop-opacity=".1"/>'
        '<stop offset="1" stop-opacity=".1"/></linearGradient>'
        f'<clipPath id="r"><rect width="{ws}" height="20" rx="3" fill="#fff"/></clipPath>'
        f'<g clip-path="url(#r)"><rect width="{lws}" height="20" fill="{LABEL_GREY}"/>'
        f'<rect x="{lws}" width="{mws}" height="20" fill="{text.colour}"/>'
        f'<rect width="{ws}" height="20" fill="url(#s)"/></g>'
        '<g fill="#fff" text-anchor="middle" font-family="Verdana,Geneva,DejaVu Sans,sans-serif" '
        'font-size="11">'
        f'<text x="{lx}" y="15" fill="#010101" fill-opacity=".3" aria-hidden="true">{label}</text>'
        f'<text x="{lx}" y="14">{label}</text>'
        f'<text x="{mx}" y="15" fill="#010101" fill-opacity=".3" aria-hidden="true">{message}</text>'
        f'<text x="{mx}" y="14">{message}</text></g></svg>'
    )
