"""The history chart: one marker per snapshot, unknown totals off the value axis, accessible, pure."""

from __future__ import annotations

import datetime as dt
import xml.etree.ElementTree as ET

from trustscore.pages import charts

SVG = "{http://www.w3.org/2000/svg}"
T0 = dt.datetime(2026, 11, 1, tzinfo=dt.UTC)


def pts(*totals: int | None) -> list[charts.Point]:
    return [charts.Point(10 + 2 * i, T0 + dt.timedelta(hours=i), t) for i, t in enumerate(totals)]


def circles(svg: str) -> list[ET.Element]:
    return list(ET.fromstring(svg).iter(f"{SVG}circle"))


def test_one_marker_per_snapshot_in_log_order_with_its_index() -> None:
    points = pts(500, 520, 610, 640)
    found = circles(charts.history_svg(points))
    assert [int(c.get("data-index", "-1")) for c in found] == [p.index for p in points]
    xs = [float(c.get("cx", "0")) for c in found]
    ys = [float(c.get("cy", "0")) for c in found]
    assert xs == sorted(xs) and ys == sorted(ys, reverse=True)  # later is right, higher is up


def test_values_sit_on_the_axis_scale() -> None:
    [zero, top] = circles(charts.history_svg(pts(0, 1000)))
    assert float(zero.get("cy", "0")) == charts.HEIGHT - charts.BOTTOM
    assert float(top.get("cy", "0")) == charts.TOP


def test_an_unknown_total_is_not_drawn_as_a_low_value() -> None:
    svg = charts.history_svg(pts(600, None, 650))
    known, unknown, after = circles(svg)
    assert unknown.get("class") == "point unknown"
    zero_y = charts.HEIGHT - charts.BOTTOM
    assert float(unknown.get("cy", "0")) > zero_y  # below the axis, on its own strip
    assert "unknown" in (unknown.find(f"{SVG}title").text or "")  # type: ignore[union-attr]
    lines = list(ET.fromstring(svg).iter(f"{SVG}polyline"))
    assert lines == []  # the line breaks at the unknown: no segment joins 600 and 650 through it
    assert known.get("class") == after.get("class") == "point"


def test_accessible_title_and_description() -> None:
    svg = ET.fromstring(charts.history_svg(pts(500, 700), title="History of <x>"))
    assert svg.get("role") == "img" and svg.get("aria-labelledby") == "chart-title chart-desc"
    assert svg.find(f"{SVG}title").text == "History of <x>"  # type: ignore[union-attr]
    desc = svg.find(f"{SVG}desc").text or ""  # type: ignore[union-attr]
    assert "2 snapshots" in desc and "between 500 and 700" in desc and "latest 700" in desc


def test_empty_and_single_point_and_determinism() -> None:
    assert circles(charts.history_svg([])) == []
    assert "No rating snapshot" in charts.history_svg([])
    [only] = circles(charts.history_svg(pts(300)))
    assert float(only.get("cx", "0")) == charts.LEFT + (charts.WIDTH - charts.LEFT - charts.RIGHT) / 2
    assert charts.history_svg(pts(1, None, 3)) == charts.history_svg(pts(1, None, 3))
