"""``trustscore log verify`` and ``trustscore log fsck``: check the log trusting only its verifier key."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from trustscore.canonical import b64encode
from trustscore.cli import common
from trustscore.client import LogClient
from trustscore.errors import InvalidInput, VerificationError
from trustscore.ledger import audit, checkpoint, keys, note
from trustscore.services.audit import fsck_database
from trustscore.store import embedded
from trustscore.verifying import VerifyingClient


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser("log", help="verify the evidence log")
    lsub = p.add_subparsers(dest="log_command", required=True, metavar="SUBCOMMAND")

    v = lsub.add_parser(
        "verify",
        help="verify a checkpoint, entries' signatures and inclusion, and consistency with an older checkpoint",
    )
    v.add_argument(
        "--server", required=True, help="where to fetch material from (nothing it says is trusted)"
    )
    v.add_argument("--verifier-key", required=True, help="the log's verifier key, or a file holding it")
    v.add_argument(
        "--checkpoint", type=Path, help="a signed checkpoint file to verify against (default: fetch)"
    )
    v.add_argument("--index", type=int, action="append", default=[], help="an entry to verify (repeatable)")
    v.add_argument(
        "--previous-checkpoint", type=Path, help="an older signed checkpoint that must be consistent"
    )
    v.add_argument("--save-checkpoint", type=Path, help="write the verified checkpoint here")
    common.add_json(v)
    v.set_defaults(func=run_verify)

    f = lsub.add_parser("fsck", help="re-derive the whole tree from every entry and compare with checkpoints")
    src = f.add_mutually_exclusive_group(required=True)
    src.add_argument("--server", help="audit a server over HTTP (needs --verifier-key)")
    src.add_argument("--database-url", help="audit a database directly (operator)")
    src.add_argument("--data-dir", type=Path, help="audit the embedded database in this data directory")
    f.add_argument("--verifier-key", help="the log's verifier key, or a file holding it")
    common.add_json(f)
    f.set_defaults(func=run_fsck)


def _read(path: Path, what: str) -> str:
    try:
        return common.read_bytes(path, what).decode()
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{what} {path} is not UTF-8 text") from exc


def run_verify(args: argparse.Namespace) -> int:
    verifier = common.verifier(args.verifier_key)
    lines: list[str] = []
    data: dict[str, Any] = {"entries": []}
    with LogClient(args.server) as client:
        log = VerifyingClient(client, verifier)
        signed = _read(args.checkpoint, "checkpoint") if args.checkpoint else client.checkpoint()
        cp = log.open(signed)
        data["checkpoint"] = {"origin": cp.origin, "size": cp.size, "root": b64encode(cp.root)}
        lines.append(f"checkpoint: size {cp.size}, signature by {verifier.name} verified")
        if args.previous_checkpoint:
            old = log.open(_read(args.previous_checkpoint, "checkpoint"))
            log.consistent(old, cp)
            data["consistent_from"] = old.size
            lines.append(f"consistency: size {old.size} -> {cp.size} verified")
        for index in args.index:
            entry = log.entry(cp, index)
            kind, signer = entry.checked.statement.kind.name, entry.checked.signer
            data["entries"].append(
                {"index": index, "kind": kind, "signer": signer, "signers": sorted(entry.signers)}
            )
            lines.append(
                f"entry {index}: {kind} by {signer}, signatures verified, included in checkpoint {cp.size}"
            )
    if args.save_checkpoint:
        common.write_bytes(args.save_checkpoint, signed.encode(), "checkpoint")
    common.emit(args, {"verified": True, **data}, lines)
    return 0


def _trusted(verifier: note.Verifier) -> dict[str, bytes]:
    """The log key: it co-signs the server's service cards."""
    return {keys.key_id(verifier.public_key): verifier.public_key}


def run_fsck(args: argparse.Namespace) -> int:
    if args.server and args.data_dir is None and args.database_url is None:  # explicit database wins
        if not args.verifier_key:
            raise InvalidInput("--server needs --verifier-key")
        report = _fsck_http(args.server, common.verifier(args.verifier_key))
    else:
        if args.data_dir is not None and not (args.data_dir / "pg" / "PG_VERSION").is_file():
            raise InvalidInput(f"{args.data_dir} holds no embedded database: pass a served --data-dir")
        dsn = args.database_url or embedded.start(args.data_dir / "pg")
        report = asyncio.run(
            fsck_database(dsn, common.verifier(args.verifier_key) if args.verifier_key else None)
        )
    status = "clean" if report.clean else f"{len(report.problems)} problem(s)"
    common.emit(
        args,
        {
            "entries": report.entries,
            "checkpoint_size": report.checkpoint_size,
            "root_matches": report.root_matches,
            "clean": report.clean,
            "problems": report.problems,
        },
        [
            *(f"problem: {problem}" for problem in report.problems),
            f"fsck: {report.entries} entries, checkpoint size {report.checkpoint_size}: {status}",
        ],
    )
    if not report.clean:
        raise VerificationError(f"fsck found {len(report.problems)} problem(s)")
    return 0


def _fsck_http(server: str, verifier: note.Verifier) -> audit.FsckReport:
    """fsck over HTTP, a page of entries at a time, against the latest checkpoint."""
    with LogClient(server) as client:
        cp = checkpoint.open_checkpoint(client.checkpoint(), verifier, None)
        check = audit.Fsck([(cp.size, cp.root)], _trusted(verifier))
        for page in client.entry_pages(0, cp.size):
            check.feed([leaf for _, leaf in page])
    return check.finish()
