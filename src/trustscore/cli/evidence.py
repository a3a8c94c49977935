"""``trustscore evidence export``: re-derive scoring evidence from a verified copy of the log.

Every entry is fetched, the whole tree re-derived and checked against a checkpoint signed by the log
key, every signature and admission rule re-checked, and the evidence written as the JSONL that
``trustscore score`` reads: a rating served by the API can be recomputed offline, trusting nothing but
the log's verifier key and the published weights.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from trustscore.cli import common
from trustscore.client import LogClient
from trustscore.errors import InvalidInput, VerificationError
from trustscore.evidence.export_jsonl import evidence_jsonl, snapshots_jsonl
from trustscore.evidence.project_log import ProjectionState, project
from trustscore.evidence.standing import POLICY_VERSION as STANDING_POLICY
from trustscore.ladder.rows_jsonl import ladder_jsonl
from trustscore.ladder.rule import CURRENT_RULE, check_rule
from trustscore.ladder.work_evidence import VERSION as WORK_EVIDENCE
from trustscore.ledger import checkpoint, merkle
from trustscore.tiles_client import TileClient


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser("evidence", help="export evidence derived from the log")
    esub = p.add_subparsers(dest="evidence_command", required=True, metavar="SUBCOMMAND")
    e = esub.add_parser(
        "export", help="verify the log and write evidence/snapshot JSONL for `trustscore score`"
    )
    where = e.add_mutually_exclusive_group(required=True)
    where.add_argument("--server", help="the API to read the log from (nothing it says is trusted)")
    where.add_argument(
        "--tiles", help="read the log as C2SP tlog-tiles from this URL prefix or directory (docs/tiles.md)"
    )
    e.add_argument("--verifier-key", required=True, help="the log's verifier key, or a file holding it")
    e.add_argument("--size", type=int, help="export the log prefix [0, SIZE) (default: the whole checkpoint)")
    e.add_argument("--model", help="keep only rating snapshots of this model (as the server does per model)")
    e.add_argument("--evidence-out", type=Path, required=True, help="evidence JSONL file, or - for stdout")
    e.add_argument("--snapshots-out", type=Path, required=True, help="snapshot JSONL file, or - for stdout")
    e.add_argument(
        "--ladder-out",
        type=Path,
        help="also write every evidence item's rung as ladder JSONL (evidence-ladder)",
    )
    e.add_argument(
        "--ladder-rule", default=CURRENT_RULE, help="the rung rule the ladder rows are derived under"
    )
    common.add_json(e)
    e.set_defaults(func=run_export)


def verified_log(
    server: str | None, verifier_key: str, size: int | None, tiles: str | None = None
) -> tuple[int, int, list[tuple[int, bytes]]]:
    """Every entry of the checkpoint of the ``server`` (or the tiled log at ``tiles``), checked against
    it: (checkpoint size, size, entries)."""
    verifier = common.verifier(verifier_key)
    if server is None and tiles is None:
        raise InvalidInput("name --server or --tiles")
    with TileClient(tiles) if tiles else LogClient(str(server)) as client:
        cp = checkpoint.open_checkpoint(client.checkpoint(), verifier, None)
        size = cp.size if size is None else size
        if not 0 <= size <= cp.size:
            raise InvalidInput(f"--size must be 0..{cp.size} (the checkpoint's size)")
        entries = client.entries(0, cp.size)
    if [i for i, _ in entries] != list(range(cp.size)):
        raise VerificationError("the server did not return every entry of the checkpoint")
    root = merkle.root_from_leaf_hashes([merkle.leaf_hash(leaf) for _, leaf in entries])
    if root != cp.root:
        raise VerificationError(
            "the entries do not hash to the checkpoint's root: the server's log is not its checkpoint"
        )
    return cp.size, size, entries


def run_export(args: argparse.Namespace) -> int:
    outs = [str(p) for p in (args.evidence_out, args.snapshots_out, args.ladder_out) if p is not None]
    if outs.count(common.STDIO) > 1:
        raise InvalidInput("only one of --evidence-out, --snapshots-out and --ladder-out can be - (stdout)")
    check_rule(args.ladder_rule)
    verifier = common.verifier(args.verifier_key)
    cp_size, size, entries = verified_log(args.server, args.verifier_key, args.size, args.tiles)
    state = ProjectionState(verifier.public_key, ladder_rule=args.ladder_rule)
    out = project(entries[:size], state, verify=True)
    snaps = [
        s.snapshot for s in out.snapshots if args.model is None or s.snapshot.model_version == args.model
    ]
    common.write_bytes(args.evidence_out, evidence_jsonl(out.evidence), "evidence file")
    common.write_bytes(args.snapshots_out, snapshots_jsonl(snaps), "snapshots file")
    if args.ladder_out is not None:
        common.write_bytes(args.ladder_out, ladder_jsonl(out.ladder), "ladder file")
    common.emit(
        args,
        {
            "checkpoint_size": cp_size,
            "exported": [0, size],
            "standing_policy": STANDING_POLICY,
            "work_evidence": WORK_EVIDENCE,
            "evidence_items": len(out.evidence),
            "snapshots": len(snaps),
            "ladder_rows": len(out.ladder),
            "ladder_rule": args.ladder_rule,
            "not_counted": [{"index": index, "reason": reason} for index, reason in out.rejected],
        },
        [
            f"verified {cp_size} entries against checkpoint {cp_size}; exported [0, {size})",
            f"derived with reporter-standing policy {STANDING_POLICY} (docs/methodology.md) and work-record "
            f"derivation {WORK_EVIDENCE} (docs/evidence-ladder.md)",
            f"evidence items: {len(out.evidence)}, snapshots: {len(snaps)}, "
            f"entries not counted: {len(out.rejected)}",
            *(f"  entry {index} does not count: {reason}" for index, reason in out.rejected),
        ],
    )
    return 0
