"""``trustscore reverify check``: recheck a logged re-verification's seed and sample, trusting only the
log's verifier key.

It fetches the re-verification entry and the report it names, proves both are in the latest signed
checkpoint, verifies their signatures (the re-verifier's key from its service card, co-signed by the log
key, with the ``reverify`` role), proves the recorded ``checkpoint_root`` is the log's root at
``checkpoint_size`` with a consistency proof to the latest checkpoint, then recomputes the seed and the
sample (:func:`trustscore.reverify.recheck.recheck`). Register with ``register(subparsers)``.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from trustscore import canonical
from trustscore.cli import common
from trustscore.client import LogClient
from trustscore.errors import VerificationError
from trustscore.kinds.exam_report import ExamReport
from trustscore.kinds.reverification import Reverification
from trustscore.ledger import checkpoint, note
from trustscore.reverify import fresh
from trustscore.reverify.recheck import recheck
from trustscore.verifying import VerifyingClient


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser("reverify", help="recheck the server's re-verification runs")
    rsub = p.add_subparsers(dest="reverify_command", required=True, metavar="SUBCOMMAND")
    c = rsub.add_parser("check", help="recompute a logged run's seed and sample from the log")
    c.add_argument(
        "--server", required=True, help="where to fetch material from (nothing it says is trusted)"
    )
    c.add_argument("--verifier-key", required=True, help="the log's verifier key, or a file holding it")
    c.add_argument("--index", type=int, required=True, help="log index of the reverification/v1 entry")
    common.add_json(c)
    c.set_defaults(func=run_check)


def _reverification(
    log: VerifyingClient, cp: checkpoint.Checkpoint, index: int
) -> tuple[Reverification, bytes]:
    """The re-verification at ``index`` and its signer's key: a log-co-signed service key with the
    reverify role."""
    entry = log.entry(cp, index)
    r = entry.checked.statement.predicate
    if not isinstance(r, Reverification):
        raise VerificationError(f"entry {index} is not a reverification/v1 statement")
    return r, log.service_key(cp, r.verifier, "reverify")


def _report(log: VerifyingClient, cp: checkpoint.Checkpoint, r: Reverification) -> tuple[ExamReport, bytes]:
    entry = log.entry(cp, r.report_index)
    report = entry.checked.statement.predicate
    if not isinstance(report, ExamReport) or report.agent != r.agent:
        raise VerificationError(f"entry {r.report_index} is not an exam report of {r.agent}")
    if entry.checked.statement_hash.hex() != r.report_sha256:
        raise VerificationError(
            f"entry {r.report_index} has statement hash {entry.checked.statement_hash.hex()}, "
            f"not {r.report_sha256}"
        )
    return report, entry.checked.statement_hash


@dataclass(frozen=True)
class Checked:
    checkpoint_size: int  # the signed checkpoint everything was proven against
    statement: Reverification
    sample: list[str]
    fresh: int = 0  # fresh items whose generation was rechecked


def check(client: LogClient, log_key: note.Verifier, index: int) -> Checked:
    """Prove and recheck the re-verification at ``index``; raise naming the first thing that fails."""
    log = VerifyingClient(client, log_key)
    cp = log.checkpoint()
    r, reverifier_key = _reverification(log, cp, index)
    report, report_hash = _report(log, cp, r)
    root = canonical.b64decode(r.checkpoint_root, what="checkpoint_root")
    log.root_at(cp, r.checkpoint_size, root)
    sample = recheck(
        report_index=r.report_index,
        report_sha256=report_hash,
        report_item_ids=[i.item_id for i in report.items],
        agent=report.agent,
        checkpoint_size=r.checkpoint_size,
        checkpoint_root=root,
        statement=r,
    )
    recorded = [
        (p.exam, p.item_id, p.exam_digest) for p in r.private_items if p.item_id.startswith(fresh.ITEM_PREFIX)
    ]
    fresh.check(f"{r.exam}@{r.exam_version}", bytes.fromhex(r.seed), recorded, reverifier_key)
    return Checked(cp.size, r, sample, len(recorded))


def run_check(args: argparse.Namespace) -> int:
    log_key = common.verifier(args.verifier_key)
    with LogClient(args.server) as client:
        done = check(client, log_key, args.index)
    r = done.statement
    common.emit(
        args,
        {
            "verified": True,
            "checkpoint_size": done.checkpoint_size,
            "index": args.index,
            "verifier": r.verifier,
            "report_index": r.report_index,
            "seed_size": r.checkpoint_size,
            "sample": done.sample,
            "fresh_items": done.fresh,
            "outcome": r.outcome,
            "matched_millis": r.matched_millis,
        },
        [
            f"checkpoint: size {done.checkpoint_size}, signature by {log_key.name} verified",
            f"entry {args.index}: reverification by {r.verifier} of report {r.report_index}, signatures verified",
            f"seed: root of size {r.checkpoint_size} proven consistent with checkpoint {done.checkpoint_size}",
            f"sample: {len(done.sample)} items recomputed and equal: {', '.join(done.sample)}",
            f"fresh: {done.fresh} generated items recomputed from the re-verifier's signatures",
            f"outcome: {r.outcome} ({r.matched_millis / 10:.1f}% of sampled items matched)",
        ],
    )
    return 0
