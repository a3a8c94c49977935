"""The one table renderer of the command line: plain text columns, the same on a terminal and in a pipe.

A small pure function rather than a library: tables here are a few columns of short cells, printed to
be read and to be grepped (``grep -o 'ts1_...'``), so no colour, box drawing or terminal probing. Cells
are converted with ``str`` (None prints as ``-``: unknown, never zero); a column is right-aligned when
its spec says so (numbers), and a column wider than its limit is cut with an ellipsis.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Column:
    """A column's header, alignment (``right`` for numbers) and widest cell (None: unlimited)."""

    header: str
    right: bool = False
    limit: int | None = None


def cell(value: object) -> str:
    """A cell's text: None is ``-`` (unknown), a float keeps at most 6 decimals, and control characters
    (text from a server, e.g. an agent's name) print as U+FFFD so they cannot move the cursor or fake lines."""
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6f}".rstrip("0").rstrip(".") if value == value else "nan"
    return "".join("\ufffd" if unicodedata.category(c) == "Cc" else c for c in str(value))


def render(columns: Sequence[Column | str], rows: Sequence[Sequence[object]]) -> list[str]:
    """The table's lines: a header line, then one line per row; columns two spaces apart, the last column
    not padded (so no line ends in spaces)."""
    specs = [c if isinstance(c, Column) else Column(c) for c in columns]
    texts = [[_cut(cell(v), spec.limit) for v, spec in zip(row, specs, strict=True)] for row in rows]
    widths = [max([len(spec.header), *(len(r[i]) for r in texts)]) for i, spec in enumerate(specs)]
    lines = []
    for cells in [[s.header for s in specs], *texts]:
        parts = [
            text.rjust(w) if spec.right else (text if last else text.ljust(w))
            for text, w, spec, last in zip(
                cells, widths, specs, [i == len(specs) - 1 for i in range(len(specs))], strict=True
            )
        ]
        lines.append("  ".join(parts).rstrip())
    return lines


def _cut(text: str, limit: int | None) -> str:
    return text if limit is None or len(text) <= limit else text[: max(limit - 1, 0)] + "…"
