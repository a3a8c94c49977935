"""``trustscore stats`` and ``trustscore ladder rescan`` (docs/evidence-ladder.md).

``stats`` prints the verified share (rung >= 3) per group with n beside every row, from the server
(``--server``) or offline from ladder rows exported with ``trustscore evidence export --ladder-out``
(``--ladder``): both run the same pure function, so they print the same numbers. ``ladder rescan``
re-derives every row of a verified log under another rule and prints who moved; it writes nothing.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

import msgspec

from trustscore.cli import common
from trustscore.cli.evidence import verified_log
from trustscore.cli.table import Column, render
from trustscore.client import LogClient
from trustscore.errors import InvalidInput
from trustscore.evidence.project_log import ProjectionState, project
from trustscore.ladder.rescan import Rescan, rescan
from trustscore.ladder.rows_jsonl import parse_ladder_jsonl
from trustscore.ladder.rule import RULES, check_rule, previous_rule
from trustscore.ladder.stats import DEFAULT_FLOOR, GROUP_BY, OutcomeStats, outcome_stats
from trustscore.ledger import note


def register(sub: Any) -> None:
    s: argparse.ArgumentParser = sub.add_parser("stats", help="verified share per group, n beside every row")
    src = s.add_mutually_exclusive_group()
    src.add_argument("--server", default=os.environ.get("TRUSTSCORE_SERVER"), help="ask this server")
    src.add_argument("--ladder", type=Path, help="offline: ladder JSONL from `evidence export --ladder-out`")
    s.add_argument("--group-by", choices=GROUP_BY, default="model")
    s.add_argument(
        "--floor", type=int, help=f"suppress groups below n (default: the server's, or {DEFAULT_FLOOR})"
    )
    common.add_json(s)
    s.set_defaults(func=run_stats)
    p: argparse.ArgumentParser = sub.add_parser("ladder", help="the evidence ladder's rules")
    lsub = p.add_subparsers(dest="ladder_command", required=True, metavar="SUBCOMMAND")
    r = lsub.add_parser("rescan", help="re-derive every row under a rule and print who moved")
    r.add_argument("--rule", required=True, help=f"the rule to re-derive under ({', '.join(sorted(RULES))})")
    r.add_argument("--server", required=True)
    r.add_argument("--verifier-key", required=True, help="the log's verifier key, or a file holding it")
    was = r.add_mutually_exclusive_group()
    was.add_argument("--recorded", type=Path, help="the rows as recorded (ladder JSONL of an earlier export)")
    was.add_argument(
        "--from-rule",
        help="else: the rows as this rule derives them (default: the rule released before --rule)",
    )
    r.add_argument("--size", type=int, help="the log prefix [0, SIZE) (default: the whole checkpoint)")
    common.add_json(r)
    r.set_defaults(func=run_rescan)


def _rate(x: float | None) -> str:
    return "null" if x is None else f"{100 * x:.1f}%"


def stats_lines(st: OutcomeStats) -> list[str]:
    lines = [
        f"verified share (rung >= {st.verified_rung}) by {st.group_by}; floor {st.floor}; "
        f"rules {', '.join(st.rules) or '-'}; log size {st.log_size}",
    ]
    rows = []
    for g in st.groups:
        d = g.stats
        if d.reason == "below_floor":
            note_ = f"suppressed: n < floor {st.floor}"
        elif d.reason is not None:
            note_ = f"{d.reason}: nothing detects outcomes here (null, not zero)"
        else:
            note_ = f"confirmed by others: {d.confirmed}"
        verified = "-" if d.verified is None else str(d.verified)
        rows.append([g.group, d.n, verified, _rate(d.rate), note_])
    lines += render(
        [Column("group", limit=32), Column("n", right=True), Column("verified", right=True),
         Column("rate", right=True), "note"],
        rows,
    )  # fmt: skip
    if not st.groups:
        lines.append("(no rows carry this field)")
    return lines


def run_stats(args: argparse.Namespace) -> int:
    if args.ladder is None and not args.server:
        raise InvalidInput("give --server URL (or TRUSTSCORE_SERVER) or --ladder FILE")
    if args.ladder is not None:
        rows = parse_ladder_jsonl(common.read_bytes(args.ladder, "ladder file"))
        size = max((r.index for r in rows), default=-1) + 1
        st = outcome_stats(rows, args.group_by, args.floor or DEFAULT_FLOOR, size)
    else:
        with LogClient(args.server) as client:
            st = msgspec.convert(client.outcome_stats(args.group_by, args.floor), OutcomeStats)
    common.emit(args, msgspec.to_builtins(st), stats_lines(st))
    return 0


def rescan_lines(r: Rescan) -> list[str]:
    lines = [
        f"re-derived {r.rows} rows under {r.rule} (recorded under {', '.join(r.from_rules) or '-'}); "
        f"{r.moved} moved",
        f"verified (rung >= 3) before: {r.verified_before}, after: {r.verified_after}",
    ]
    lines += render(
        ["", Column("rows", right=True), Column("share", right=True), "why"],
        [[m.outcome, m.rows, _rate(m.share), m.reason] for m in r.table],
    )
    return lines


def run_rescan(args: argparse.Namespace) -> int:
    rule = check_rule(args.rule)
    before = None  # the rule the compared rows are derived under, unless they are --recorded
    if args.recorded is None:
        before = args.from_rule or previous_rule(rule)
        if before is None:
            raise InvalidInput(
                f"{rule} is the first rule: name the rows to compare with (--recorded or --from-rule)"
            )
        check_rule(before)
    verifier: note.Verifier = common.verifier(args.verifier_key)
    _, size, entries = verified_log(args.server, args.verifier_key, args.size)
    if args.recorded is not None:
        recorded = parse_ladder_jsonl(common.read_bytes(args.recorded, "recorded ladder file"))
        size = max((r.index for r in recorded), default=-1) + 1 if args.size is None else size
    else:
        assert before is not None
        old = ProjectionState(verifier.public_key, ladder_rule=before)
        recorded = project(entries[:size], old, verify=True).ladder
    new = ProjectionState(verifier.public_key, ladder_rule=rule)
    if size > len(entries):
        raise InvalidInput("the recorded rows reach beyond the server's checkpoint")
    result = rescan(recorded, project(entries[:size], new, verify=True).ladder, rule)
    common.emit(args, msgspec.to_builtins(result), rescan_lines(result))
    return 0
