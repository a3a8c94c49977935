"""Deterministic text width estimation for badges, without a font file.

Widths are Verdana's advance widths in font units (2048 per em), the font shields-style badges name
first; a character missing from the table counts as a digit's width. The estimate only sizes the badge's
boxes, so it must be stable (same text, same width on every machine), not exact.
"""

from __future__ import annotations

UNITS_PER_EM = 2048
DEFAULT_UNITS = 1302  # a digit: every digit in Verdana has this advance

_GROUPS: dict[int, str] = {
    562: "il|",
    676: "j",
    720: " f",
    745: ".,;",
    807: "t",
    866: "I",
    874: "r-:",
    930: "()[]{}",
    931: "J",
    1067: "cs",
    1075: "z",
    1158: "L",
    1178: "F/",
    1212: "kvxy",
    1219: "e",
    1226: "a",
    1241: "TY",
    1243: "o",
    1251: "P",
    1278: "bdgpq",
    1294: "E",
    1296: "hnu",
    1302: "0123456789_#$+=<>~?",
    1399: "SZ",
    1401: "AV",
    1403: "X",
    1405: "B",
    1423: "K",
    1427: "R",
    1430: "C",
    1499: "U",
    1532: "N",
    1540: "H",
    1577: "D",
    1587: "G",
    1623: "OQ",
    1675: "w",
    1716: "±✓",
    1751: "M",
    1992: "m",
    2025: "W",
    2150: "%@",
}
UNITS: dict[str, int] = {ch: units for units, chars in _GROUPS.items() for ch in chars}


def text_width(text: str, size_px: int = 11) -> float:
    """The width in pixels of ``text`` set in Verdana at ``size_px``, rounded to a tenth of a pixel."""
    units = sum(UNITS.get(ch, DEFAULT_UNITS) for ch in text)
    return round(units * size_px / UNITS_PER_EM, 1)
