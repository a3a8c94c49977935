"""The one table renderer: aligned plain text, unknown as ``-``, long cells cut, no terminal escapes."""

from __future__ import annotations

from trustscore.cli.table import Column, cell, render


def test_columns_align_and_lines_do_not_end_in_spaces() -> None:
    lines = render(["NAME", Column("N", right=True), "NOTE"], [["a", 1, "x"], ["longer", 100, None]])
    assert lines == ["NAME      N  NOTE", "a         1  x", "longer  100  -"]


def test_null_is_a_dash_never_zero() -> None:
    assert cell(None) == "-" and cell(0) == "0" and cell(0.0) == "0" and cell(87.5) == "87.5"
    assert cell(1 / 3) == "0.333333"


def test_a_long_cell_is_cut_with_an_ellipsis() -> None:
    [_, row] = render([Column("DIGEST", limit=8)], [["sha256:0123456789"]])
    assert row == "sha256:…"


def test_control_characters_from_a_server_cannot_drive_the_terminal() -> None:
    """Attack: an agent named with ANSI escapes (clear screen, fake lines) shown by `agent list`."""
    [_, row] = render(["NAME"], [["evil\x1b[2J\rok\nline"]])
    assert "\x1b" not in row and "\r" not in row and "\n" not in row
    assert row.startswith("evil")
