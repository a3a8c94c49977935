"""``trustscore reverify check``: recheck a logged re-verification's seed and sample, trusting only the
log's verifier key.

It fetches the re-verification entry and the report it names, proves both are in the latest signed
checkpoint, verifies their signatures (the re-verifier's key from its service card, co-signed by the log
key, with the ``reverify`` role), proves the recorded ``checkpoint_root`` is the log's root at
``checkpoint_size`` with a consistency proof to the latest checkpoint, then recomputes the seed and the
sample (:func:`trustscore.reverify.sampling.recheck`). Register with ``register(subparsers)``.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from trustscore import canonical
from trustscore.cli import common
from trustscore.cli.log import _verify_included as _included  # entry + inclusion proof; shared
from trustscore.client import LogClient
from trustscore.errors import VerificationError
from trustscore.exams.report import ExamReport
from trustscore.ledger import audit, checkpoint, dsse, keys, merkle, note
from trustscore.ledger.reverification import Reverification
from trustscore.ledger.service_card import ServiceCard
from trustscore.reverify import sampling


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser("reverify", help="recheck the server's re-verification runs")
    rsub = p.add_subparsers(dest="reverify_command", required=True, metavar="SUBCOMMAND")
    c = rsub.add_parser("check", help="recompute a logged run's seed and sample from the log")
    c.add_argument(
        "--server", required=True, help="where to fetch material from (nothing it says is trusted)"
    )
    c.add_argument("--verifier-key", required=True, help="the log's verifier key, or a file holding it")
    c.add_argument("--index", type=int, required=True, help="log index of the reverification/v1 entry")
    c.set_defaults(func=run_check)


def _reverifier_key(
    client: LogClient, cp: checkpoint.Checkpoint, verifier: str, log_key: note.Verifier
) -> bytes:
    """The re-verifier's public key from its service card: co-signed by the log key, with the reverify role."""
    card_index = client.key_index(verifier)
    prepared = audit.parse_leaf(_included(client, cp, card_index))
    service, own = prepared.statement.predicate, prepared.statement.facts.introduces_key
    if not isinstance(service, ServiceCard) or own is None or prepared.statement.facts.subject != verifier:
        raise VerificationError(f"entry {card_index} is not the service card of {verifier}")
    log_id = keys.key_id(log_key.public_key)
    known = {verifier: own, log_id: log_key.public_key}
    signed = dsse.verify_envelope(prepared.envelope, known.get)
    if not {verifier, log_id} <= set(signed.signer_ids):
        raise VerificationError(
            f"the service card of {verifier} (entry {card_index}) is not co-signed by the log key"
        )
    if "reverify" not in service.roles:
        raise VerificationError(f"service key {verifier} has no reverify role")
    return own


def _reverification(
    client: LogClient, cp: checkpoint.Checkpoint, index: int, log_key: note.Verifier
) -> Reverification:
    leaf = _included(client, cp, index)
    r = audit.parse_leaf(leaf).statement.predicate
    if not isinstance(r, Reverification):
        raise VerificationError(f"entry {index} is not a reverification/v1 statement")
    public = _reverifier_key(client, cp, r.verifier, log_key)
    audit.verify_leaf(leaf, lambda kid: public if kid == r.verifier else None)
    return r


def _report(client: LogClient, cp: checkpoint.Checkpoint, r: Reverification) -> tuple[ExamReport, bytes]:
    leaf = _included(client, cp, r.report_index)
    prepared = audit.parse_leaf(leaf)
    report = prepared.statement.predicate
    if not isinstance(report, ExamReport) or report.agent != r.agent:
        raise VerificationError(f"entry {r.report_index} is not an exam report of {r.agent}")
    public = canonical.b64decode(report.public_key, what="public_key")
    audit.verify_leaf(leaf, lambda kid: public if kid == report.agent else None)
    if prepared.statement_hash.hex() != r.report_sha256:
        raise VerificationError(
            f"entry {r.report_index} has statement hash {prepared.statement_hash.hex()}, not {r.report_sha256}"
        )
    return report, prepared.statement_hash


def prove_root(client: LogClient, cp: checkpoint.Checkpoint, size: int, root: bytes) -> None:
    """Raise unless ``root`` is the log's root at ``size``, by a consistency proof to checkpoint ``cp``."""
    if not 0 < size <= cp.size:
        raise VerificationError(
            f"checkpoint_size {size} is not within the signed checkpoint (size {cp.size})"
        )
    if size == cp.size:
        if root != cp.root:
            raise VerificationError(f"the recorded root of size {size} is not the signed checkpoint's root")
        return
    merkle.verify_consistency(size, cp.size, client.consistency_proof(size, cp.size), root, cp.root)


@dataclass(frozen=True)
class Checked:
    checkpoint_size: int  # the signed checkpoint everything was proven against
    statement: Reverification
    sample: list[str]


def check(client: LogClient, log_key: note.Verifier, index: int) -> Checked:
    """Prove and recheck the re-verification at ``index``; raise naming the first thing that fails."""
    cp = checkpoint.open_checkpoint(client.checkpoint(), log_key, None)
    r = _reverification(client, cp, index, log_key)
    report, report_hash = _report(client, cp, r)
    root = canonical.b64decode(r.checkpoint_root, what="checkpoint_root")
    prove_root(client, cp, r.checkpoint_size, root)
    sample = sampling.recheck(
        report_index=r.report_index,
        report_sha256=report_hash,
        report_item_ids=[i.item_id for i in report.items],
        agent=report.agent,
        checkpoint_size=r.checkpoint_size,
        checkpoint_root=root,
        statement=r,
    )
    return Checked(cp.size, r, sample)


def run_check(args: argparse.Namespace) -> int:
    log_key = common.verifier(args.verifier_key)
    with LogClient(args.server) as client:
        done = check(client, log_key, args.index)
    r = done.statement
    print(f"checkpoint: size {done.checkpoint_size}, signature by {log_key.name} verified")
    print(
        f"entry {args.index}: reverification by {r.verifier} of report {r.report_index}, signatures verified"
    )
    print(f"seed: root of size {r.checkpoint_size} proven consistent with checkpoint {done.checkpoint_size}")
    print(f"sample: {len(done.sample)} items recomputed and equal: {', '.join(done.sample)}")
    print(f"outcome: {r.outcome} ({r.matched_millis / 10:.1f}% of sampled items matched)")
    return 0
