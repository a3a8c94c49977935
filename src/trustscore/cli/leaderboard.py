"""``trustscore leaderboard``: agents ranked by total or one dimension, from a server's public API."""

from __future__ import annotations

import argparse
from typing import Any

from trustscore.cli import common
from trustscore.cli.table import Column, render
from trustscore.client import LogClient
from trustscore.kinds.graded import DIMENSIONS


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser("leaderboard", help="agents ranked by total or one dimension")
    p.add_argument("--server", required=True, help="trustscore server URL")
    p.add_argument("--model", help="model version (default: the server's default model)")
    p.add_argument(
        "--dimension", choices=DIMENSIONS, help="rank by this dimension's score instead of the total"
    )
    p.add_argument("--limit", type=common.bounded(1, 1000), default=20, help="agents shown, 1..1000")
    common.add_json(p)
    p.set_defaults(func=run)


def board_lines(board: dict[str, Any]) -> list[str]:
    """The leaderboard as a table of ranked agents, then the unranked ones with their reason."""
    by = board.get("dimension") or "total"
    rows = [
        [r["rank"], r["agent"], r["score"] if board.get("dimension") else r["total"], r["grade"],
         ", ".join(f"{d} {m}" for d, m in sorted(r.get("medals", {}).items())) or "-"]
        for r in board["ranked"]
    ]  # fmt: skip
    # The log size the board holds for: one made while the log moved may lag (a server before 2026-12-07
    # did not say).
    size = board.get("log_size")
    lines = [f"leaderboard of {board['model_version']} by {by}"]
    if size is not None:
        lines[0] += f", as of log size {size}"
    lines += render(
        [Column("RANK", right=True), "AGENT", Column(by.upper(), right=True), "GRADE", "MEDALS"], rows
    )
    if not board["ranked"]:
        lines.append("(no agent is ranked yet)")
    lines += [f"unranked: {u['agent']} ({u['reason']})" for u in board["unranked"]]
    return lines


def run(args: argparse.Namespace) -> int:
    params = {"model": args.model, "dimension": args.dimension, "limit": args.limit}
    with LogClient(args.server) as client:
        board = client.get_json("/v1/leaderboard", params)
    common.emit(args, board, board_lines(board))
    return 0
