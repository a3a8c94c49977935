"""``trustscore exam run --server`` (fresh sittings), practice runs, and ``exam check-sitting``."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable
from typing import Any, TextIO

from trustscore.cli import common, numpy_cpu
from trustscore.errors import InvalidInput, VerificationError
from trustscore.exams.forms import FORMS
from trustscore.exams.loader import ExamDirs
from trustscore.exams.sitting_check import check_sitting
from trustscore.grading import ItemGrade
from trustscore.grading.model import Grade
from trustscore.kinds.sittings import SittingClose, SittingOpen, SittingReport, SittingRequest
from trustscore.ledger import keys
from trustscore.ledger.statements import ParsedStatement
from trustscore.sdk.adapters import agent_from_spec
from trustscore.sdk.runner import Progress, run_exam
from trustscore.sdk.sitting import SittingClient, practice_exam, sit_on_server
from trustscore.verifying import VerifiedEntry, VerifyingClient

Table = Callable[[list[ItemGrade], TextIO], None]


def exams_to_sit(args: argparse.Namespace) -> list[str]:
    if args.all:
        return sorted(FORMS)
    if not args.exam:
        raise InvalidInput("name an exam with --exam NAME@VERSION, or sit every exam with --all")
    return [args.exam]


def run_on_server(args: argparse.Namespace, progress: Progress | None, table: Table) -> int:
    """Open a fresh sitting of each exam on the server, run it with the agent and report it."""
    key = keys.read_key_file(args.key)
    agent = agent_from_spec(args.agent, numpy_cpu.others_environ(os.environ))
    try:
        with SittingClient(args.server, timeout=120.0) as client:
            for exam in exams_to_sit(args):
                sat = sit_on_server(client, key, exam, agent, timeout_s=args.item_timeout, progress=progress)
                closed = sat.closed
                grades = [ItemGrade(i["item_id"], i["dimension"], i["grader"],
                                    Grade(int(i["value_millis"]), i["result"], str(i.get("detail", ""))))
                          for i in closed["items"]]  # fmt: skip
                table(grades, sys.stdout)
                print(f"{exam}: sitting {closed['sitting']} reported (entry {closed['report_index']}); the server's "
                      f"grades and revealed seed are in entry {closed['close_index']}")  # fmt: skip
    finally:
        agent.close()
    return 0


def run_practice(args: argparse.Namespace, progress: Progress | None, table: Table) -> int:
    """A local practice instance from a random seed: graded locally, never submitted."""
    agent = agent_from_spec(args.agent, numpy_cpu.others_environ(os.environ))
    try:
        for exam in exams_to_sit(args):
            run = run_exam(practice_exam(exam, ExamDirs.from_env()), agent, timeout_s=args.item_timeout,
                           progress=progress)  # fmt: skip
            table(
                [ItemGrade(r.item.id, r.item.dimension, r.item.grader, r.grade) for r in run.records],
                sys.stdout,
            )
            print(f"{exam}: practice instance graded locally; nothing was submitted (use --server to sit it)")
    finally:
        agent.close()
    return 0


# --- check-sitting --------------------------------------------------------------------------------------


def _payload_sha256(entry: VerifiedEntry) -> str:
    return entry.checked.statement_hash.hex()


def _typed(stmt: ParsedStatement, kind: type[Any], index: int) -> Any:
    if not isinstance(stmt.predicate, kind):
        raise VerificationError(f"entry {index} is a {stmt.kind.name} statement, not {kind.__name__}")
    return stmt.predicate


def check(args: argparse.Namespace) -> int:
    """Recompute a closed sitting's seed from the log, regenerate and regrade it, compare with the server."""
    verifier = common.verifier(args.verifier_key)
    n = args.sitting
    with SittingClient(args.server) as client:
        log = VerifyingClient(client, verifier)
        cp = log.checkpoint()
        state = client.state(n)
        if state.get("state") != "closed" or not isinstance(state.get("close_index"), int):
            raise InvalidInput(
                f"sitting {n} is not closed yet (state {state.get('state')!r}); check it after its close"
            )
        opened: SittingOpen = _typed(log.entry(cp, n).checked.statement, SittingOpen, n)
        request_entry = log.entry(cp, opened.request_index)
        request: SittingRequest = _typed(
            request_entry.checked.statement, SittingRequest, opened.request_index
        )
        close_index = int(state["close_index"])
        close: SittingClose = _typed(log.entry(cp, close_index).checked.statement, SittingClose, close_index)
        log.service_key(cp, opened.service, "grader")  # co-signed by the log key, the trust anchor
        report: SittingReport | None = None
        report_entry: VerifiedEntry | None = None
        if close.report_index is not None:
            report_entry = log.entry(cp, close.report_index)
            report = _typed(report_entry.checked.statement, SittingReport, close.report_index)
        # The root the seed used is the log's root right after the sitting-open: prove it against the
        # signed checkpoint.
        size = n + 1
        log.root_at(cp, size, bytes.fromhex(close.root))
        checked = check_sitting(
            request, _payload_sha256(request_entry), opened, n, close, report,
            None if report_entry is None else _payload_sha256(report_entry),
        )  # fmt: skip
    mean = sum(g.grade.value for g in checked.grades) / max(len(checked.grades), 1) / 1000
    print(f"sitting {n} ({opened.exam}, {close.outcome}): root at size {size} proven against checkpoint {cp.size}; "
          f"secret matches the commitment; seed {checked.seed.hex()[:16]}… regenerates {checked.items} items; "
          f"all {len(checked.grades)} grades equal the server's (mean {mean:.3f})")  # fmt: skip
    return 0


def register_check(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "check-sitting", help="recompute a closed sitting from the log and compare with the server's grades"
    )
    p.add_argument("--server", required=True, help="where to fetch the log from (nothing it says is trusted)")
    p.add_argument("--verifier-key", required=True, help="the log's verifier key, or a file holding it")
    p.add_argument(
        "--sitting", required=True, type=int, help="the sitting's number (its sitting-open log index)"
    )
    p.set_defaults(func=check)
