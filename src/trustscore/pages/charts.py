"""The rating-history chart: an SVG line of the logged snapshots' totals, drawn on the server.

One marker per snapshot, placed by the time the snapshot was taken. A snapshot whose total was null
(no scored dimension then) is not drawn on the value axis, which would read as a low score: it gets a
hollow grey marker on a separate "unknown" strip under the axis, and the line breaks there. Pure: same
points, same bytes.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass
from xml.sax.saxutils import escape

WIDTH, HEIGHT = 640, 240
LEFT, RIGHT, TOP, BOTTOM = 48, 16, 16, 56  # plot margins; the unknown strip sits in the bottom margin
TICKS = (0, 200, 400, 600, 800, 1000)


@dataclass(frozen=True)
class Point:
    """One logged snapshot of an agent's rating: its log index, when it was taken, its total."""

    index: int
    at: dt.datetime
    total: int | None


def _f(x: float) -> str:
    return f"{x:.1f}"


def _day(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M")


def describe(points: Sequence[Point]) -> str:
    """A one-sentence text equivalent of the chart (its <desc> and the page's caption)."""
    if not points:
        return "No rating snapshot has been logged for this agent yet."
    known = [p for p in points if p.total is not None]
    span = f"from {_day(points[0].at)} to {_day(points[-1].at)} UTC"
    if not known:
        return f"{len(points)} snapshots {span}; every total was unknown."
    lo, hi = (
        min(p.total for p in known if p.total is not None),
        max(p.total for p in known if p.total is not None),
    )
    last = points[-1].total
    latest = "unknown" if last is None else str(last)
    return f"{len(points)} snapshots {span}; totals between {lo} and {hi}; latest {latest}."


def history_svg(points: Sequence[Point], scale: int = 1000, title: str = "Rating history") -> str:
    """The chart of ``points`` (in log order) on a 0..``scale`` value axis."""
    pw, ph = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    times = [p.at.timestamp() for p in points]
    t0, t1 = (min(times), max(times)) if times else (0.0, 0.0)

    def x(t: float) -> float:
        return LEFT + (pw / 2 if t1 == t0 else (t - t0) / (t1 - t0) * pw)

    def y(v: int) -> float:
        return TOP + ph - v / scale * ph

    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" '
        f'height="{HEIGHT}" role="img" aria-labelledby="chart-title chart-desc" class="chart">',
        f'<title id="chart-title">{escape(title)}</title>',
        f'<desc id="chart-desc">{escape(describe(points))}</desc>',
    ]
    for tick in TICKS:
        v = tick * scale // 1000
        out.append(
            f'<line class="grid" x1="{LEFT}" x2="{WIDTH - RIGHT}" y1="{_f(y(v))}" y2="{_f(y(v))}"/>'
            f'<text class="tick" x="{LEFT - 6}" y="{_f(y(v) + 4)}" text-anchor="end">{v}</text>'
        )
    strip = HEIGHT - BOTTOM + 30
    if points:
        out.append(
            f'<text class="tick" x="{LEFT}" y="{HEIGHT - BOTTOM + 16}">{escape(_day(points[0].at))}</text>'
        )
        if len(points) > 1:
            out.append(
                f'<text class="tick" x="{WIDTH - RIGHT}" y="{HEIGHT - BOTTOM + 16}" text-anchor="end">'
                f"{escape(_day(points[-1].at))}</text>"
            )
    if any(p.total is None for p in points):
        out.append(f'<text class="tick" x="{LEFT - 6}" y="{strip + 4}" text-anchor="end">unknown</text>')
    runs: list[list[str]] = [[]]
    for p, t in zip(points, times, strict=True):
        if p.total is None:
            runs.append([])
        else:
            runs[-1].append(f"{_f(x(t))},{_f(y(p.total))}")
    out += [f'<polyline class="line" points="{" ".join(r)}"/>' for r in runs if len(r) > 1]
    for p, t in zip(points, times, strict=True):
        said = "unknown" if p.total is None else str(p.total)
        tip = escape(f"log index {p.index}, {_day(p.at)} UTC: total {said}")
        cls, cy = ("point unknown", strip) if p.total is None else ("point", y(p.total))
        out.append(
            f'<circle class="{cls}" data-index="{p.index}" cx="{_f(x(t))}" cy="{_f(cy)}" r="4">'
            f"<title>{tip}</title></circle>"
        )
    out.append("</svg>")
    return "".join(out)
