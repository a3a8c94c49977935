"""``trustscore log verify`` and ``trustscore log fsck``: check the log trusting only its verifier key."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

import asyncpg

from trustscore.cli import common
from trustscore.client import LogClient
from trustscore.errors import InvalidInput, StorageError, VerificationError
from trustscore.ledger import audit, checkpoint, keys, note
from trustscore.store import embedded
from trustscore.store.log import dump
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
    v.set_defaults(func=run_verify)

    f = lsub.add_parser("fsck", help="re-derive the whole tree from every entry and compare with checkpoints")
    src = f.add_mutually_exclusive_group(required=True)
    src.add_argument("--server", help="audit a server over HTTP (needs --verifier-key)")
    src.add_argument("--database-url", help="audit a database directly (operator)")
    src.add_argument("--data-dir", type=Path, help="audit the embedded database in this data directory")
    f.add_argument("--verifier-key", help="the log's verifier key, or a file holding it")
    f.set_defaults(func=run_fsck)


def _read(path: Path, what: str) -> str:
    try:
        return path.read_text()
    except OSError as exc:
        raise InvalidInput(f"cannot read {what} {path}: {exc.strerror}") from exc


def run_verify(args: argparse.Namespace) -> int:
    verifier = common.verifier(args.verifier_key)
    with LogClient(args.server) as client:
        log = VerifyingClient(client, verifier)
        signed = _read(args.checkpoint, "checkpoint") if args.checkpoint else client.checkpoint()
        cp = log.open(signed)
        print(f"checkpoint: size {cp.size}, signature by {verifier.name} verified")
        if args.previous_checkpoint:
            old = log.open(_read(args.previous_checkpoint, "checkpoint"))
            log.consistent(old, cp)
            print(f"consistency: size {old.size} -> {cp.size} verified")
        for index in args.index:
            entry = log.entry(cp, index)
            print(
                f"entry {index}: {entry.checked.statement.kind.name} by {entry.checked.signer}, "
                f"signatures verified, included in checkpoint {cp.size}"
            )
    if args.save_checkpoint:
        args.save_checkpoint.write_text(signed)
    return 0


def _trusted(verifier: note.Verifier) -> dict[str, bytes]:
    """The log key: it co-signs the server's service cards."""
    return {keys.key_id(verifier.public_key): verifier.public_key}


def run_fsck(args: argparse.Namespace) -> int:
    if args.server:
        if not args.verifier_key:
            raise InvalidInput("--server needs --verifier-key")
        report = _fsck_http(args.server, common.verifier(args.verifier_key))
    else:
        if args.data_dir is not None and not (args.data_dir / "pg" / "PG_VERSION").is_file():
            raise InvalidInput(f"{args.data_dir} holds no embedded database: pass a served --data-dir")
        dsn = args.database_url or embedded.start(args.data_dir / "pg")
        report = asyncio.run(_fsck_db(dsn, common.verifier(args.verifier_key) if args.verifier_key else None))
    for problem in report.problems:
        print(f"problem: {problem}")
    status = "clean" if report.clean else f"{len(report.problems)} problem(s)"
    print(f"fsck: {report.entries} entries, checkpoint size {report.checkpoint_size}: {status}")
    if not report.clean:
        raise VerificationError(f"fsck found {len(report.problems)} problem(s)")
    return 0


def _fsck_http(server: str, verifier: note.Verifier) -> audit.FsckReport:
    with LogClient(server) as client:
        cp = checkpoint.open_checkpoint(client.checkpoint(), verifier, None)
        leaves = [leaf for _, leaf in client.entries(0, cp.size)]
    return audit.fsck(leaves, [(cp.size, cp.root)], trusted=_trusted(verifier))


async def _fsck_db(dsn: str, given: note.Verifier | None) -> audit.FsckReport:
    try:
        conn = await asyncpg.connect(dsn)
    except (OSError, asyncpg.PostgresError) as exc:
        raise StorageError(f"cannot connect to PostgreSQL: {exc}") from exc
    try:
        d = await dump(conn)
    finally:
        await conn.close()
    if given is None and d.verifier_key is None:
        raise VerificationError("the database names no log verifier key; pass --verifier-key")
    verifier = given or note.parse_verifier_key(d.verifier_key or "")
    problems: list[str] = []
    cps: list[tuple[int, bytes]] = []
    for c in d.checkpoints:
        try:
            opened = checkpoint.open_checkpoint(c.signed_note, verifier, None)
        except VerificationError as exc:
            problems.append(f"checkpoint {c.size}: {exc.message}")
            continue
        if (opened.size, opened.root) != (c.size, c.root):
            problems.append(f"checkpoint {c.size}: signed note does not match the stored size/root")
        cps.append((opened.size, opened.root))
    for want, e in enumerate(d.entries):
        if e.index != want:
            problems.append(f"entry indexes are not contiguous at {want}")
            break
    report = audit.fsck(
        [e.leaf for e in d.entries],
        cps,
        [e.leaf_hash for e in d.entries],
        stored_nodes=d.nodes,
        trusted=_trusted(verifier),
    )
    report.problems[:0] = problems
    return report
