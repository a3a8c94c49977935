"""``trustscore exam``: list exam sets, sit one with an agent, re-grade a report, submit it."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import TextIO

from trustscore.cli import numpy_cpu, sitting
from trustscore.cli.table import Column, render
from trustscore.errors import InvalidInput, TrustscoreError
from trustscore.exams.loader import ExamDirs, list_exams, load_exam
from trustscore.exams.reporting import exam_for, grade_report
from trustscore.grading import ItemGrade
from trustscore.kinds.exam_report import read_report, write_report
from trustscore.ledger import keys
from trustscore.sdk.adapters import agent_from_spec
from trustscore.sdk.runner import run_exam, sign_run
from trustscore.sdk.submit import submit


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    exam = subparsers.add_parser("exam", help="sit exams and handle exam reports")
    sub = exam.add_subparsers(dest="exam_command", required=True, metavar="SUBCOMMAND")

    p = sub.add_parser("list", help="list the exam sets available here")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser(
        "run",
        help="sit a fresh instance on a server (--server), practise locally, or report the public set (--out)",
    )
    p.add_argument("--exam", help="NAME@VERSION, e.g. capability@1")
    p.add_argument("--all", action="store_true", help="sit every exam (with --server, or as practice)")
    p.add_argument("--server", help="open a fresh sitting on this server, run it and report it")
    p.add_argument("--agent", required=True, help="python:MOD:FN | cmd:COMMAND | http:URL | openai:MODEL@URL")
    p.add_argument("--key", type=Path, help="the agent's key file (needed with --server or --out)")
    p.add_argument("--out", type=Path, help="write a signed report of the public exam set here")
    p.add_argument(
        "--item-timeout", type=float, default=None, help="seconds per answer (default: the exam's)"
    )
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=cmd_run)

    sitting.register_check(sub)

    p = sub.add_parser("grade", help="verify and re-grade a report offline")
    p.add_argument("report", type=Path)
    p.add_argument("--json", action="store_true", help="print the grades as JSON")
    p.set_defaults(func=cmd_grade)

    p = sub.add_parser("submit", help="submit a report to a trustscore server")
    p.add_argument("report", type=Path)
    p.add_argument("--server", required=True, help="base URL of the server")
    p.set_defaults(func=cmd_submit)


def cmd_list(args: argparse.Namespace) -> int:
    rows = [
        [e.id, e.file.tier, e.file.dimension, len(e.items), e.digest] for e in list_exams(ExamDirs.from_env())
    ]
    for line in render(
        ["EXAM", "TIER", "DIMENSION", Column("ITEMS", right=True), Column("DIGEST", limit=24)], rows
    ):
        print(line)
    return 0


def _bar(out: TextIO) -> object:
    def progress(done: int, total: int, item_id: str) -> None:
        width = 30
        filled = width * done // max(total, 1)
        out.write(f"\r[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {item_id:<24}")
        if done == total:
            out.write("\n")
        out.flush()

    return progress


def _table(grades: list[ItemGrade], out: TextIO) -> None:
    rows = [
        [g.item_id, g.grader, g.grade.result, f"{g.grade.value / 1000:.3f}", g.grade.detail] for g in grades
    ]
    columns: list[Column | str] = [
        "ITEM",
        "GRADER",
        "RESULT",
        Column("VALUE", right=True),
        Column("DETAIL", limit=70),
    ]
    for line in render(columns, rows):
        print(line, file=out)
    if grades:
        counts = {r: sum(1 for g in grades if g.grade.result == r) for r in ("success", "partial", "failure")}
        mean = sum(g.grade.value for g in grades) / len(grades) / 1000
        print(f"{len(grades)} items: {counts['success']} success, {counts['partial']} partial, "
              f"{counts['failure']} failure; mean {mean:.3f}", file=out)  # fmt: skip


def cmd_run(args: argparse.Namespace) -> int:
    progress = None if args.quiet or not sys.stderr.isatty() else _bar(sys.stderr)
    if args.out is None:  # --out asks for a report file, even where TRUSTSCORE_SERVER is set
        if args.server and args.key is None:
            raise InvalidInput("--server needs the agent's --key to sign the sitting")
        sit = sitting.run_on_server if args.server else sitting.run_practice
        return sit(args, progress, _table)  # type: ignore[arg-type]
    if args.exam is None or args.key is None:
        raise InvalidInput("--out writes a report of one public exam set: give --exam and --key")
    if args.out.exists():
        raise InvalidInput(f"{args.out} already exists; refusing to overwrite a report")
    key = keys.read_key_file(args.key)
    exam = load_exam(args.exam, ExamDirs.from_env())
    agent = agent_from_spec(args.agent, numpy_cpu.others_environ(os.environ))
    try:
        run = run_exam(exam, agent, timeout_s=args.item_timeout, progress=progress)  # type: ignore[arg-type]
    except TrustscoreError:
        if progress is not None:
            sys.stderr.write("\n")  # end the progress bar's line so the error is a line of its own
        raise
    finally:
        agent.close()
    for record in run.records:
        for note in record.notes:
            print(f"trustscore: warning: {record.item.id}: {note}", file=sys.stderr)
    write_report(args.out, sign_run(run, key))
    grades = [ItemGrade(r.item.id, r.item.dimension, r.item.grader, r.grade) for r in run.records]
    _table(grades, sys.stdout)
    print(f"report for {exam.id} by {key.id} written to {args.out} ({run.elapsed_ms} ms)")
    return 0


def cmd_grade(args: argparse.Namespace) -> int:
    verified = read_report(args.report)
    report = verified.report
    exam = exam_for(report, ExamDirs.from_env())
    grades = grade_report(report, exam)
    client = {i.item_id: i.client_grade for i in report.items}
    if args.json:
        print(json.dumps([{"item_id": g.item_id, "grader": g.grader, "value": g.grade.value,
                           "result": g.grade.result, "detail": g.grade.detail} for g in grades], indent=2))  # fmt: skip
    else:
        print(f"{exam.id} ({exam.digest}) sat by {report.agent} via {report.adapter}")
        _table(grades, sys.stdout)
    differing = [g.item_id for g in grades if client[g.item_id] != g.grade.value]
    if differing:
        print(f"client-side grades differ from re-grading on: {', '.join(differing)}", file=sys.stderr)
        return 2
    return 0


def cmd_submit(args: argparse.Namespace) -> int:
    verified = read_report(args.report)
    graded = submit(verified.envelope, args.server)
    items = graded["items"]
    total = sum(int(i["value_millis"]) for i in items)
    print(
        f"report logged at index {graded['report_index']}; server's graded evidence at {graded['evidence_index']}"
    )
    print(
        f"server grades ({graded['exam']}): {len(items)} items, mean {total / max(len(items), 1) / 1000:.3f}"
    )
    return 0
