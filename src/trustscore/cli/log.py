"""``trustscore log verify`` and ``trustscore log fsck``: check the log trusting only its verifier key."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path
from typing import Any

from trustscore.canonical import b64encode
from trustscore.cli import common
from trustscore.client import LogClient
from trustscore.errors import InvalidInput, ProofError, VerificationError
from trustscore.ledger import audit, checkpoint, keys, note, tiles
from trustscore.ledger.tiles import Tile
from trustscore.services.audit import fsck_database
from trustscore.store import embedded
from trustscore.tiles_client import TileClient
from trustscore.verifying import VerifyingClient


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser("log", help="verify the evidence log")
    lsub = p.add_subparsers(dest="log_command", required=True, metavar="SUBCOMMAND")

    v = lsub.add_parser(
        "verify",
        help="verify a checkpoint, entries' signatures and inclusion, and consistency with an older checkpoint",
    )
    where = v.add_mutually_exclusive_group(required=True)
    where.add_argument("--server", help="where to fetch material from (nothing it says is trusted)")
    where.add_argument(
        "--tiles",
        help="read the log as C2SP tlog-tiles from this URL prefix or directory mirror instead, and "
        "rebuild the whole tree from the tiles (docs/tiles.md)",
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
    src.add_argument("--tiles", help="audit a log served as C2SP tlog-tiles (URL prefix or directory)")
    f.add_argument("--verifier-key", help="the log's verifier key, or a file holding it")
    common.add_json(f)
    f.set_defaults(func=run_fsck)

    m = lsub.add_parser("mirror", help="copy a tiled log into a directory, every tile verified on the way")
    m.add_argument("--tiles", required=True, help="the C2SP tlog-tiles URL prefix (or directory) to copy")
    m.add_argument("--verifier-key", required=True, help="the log's verifier key, or a file holding it")
    m.add_argument("--out", type=Path, required=True, help="the directory to write (serve it statically)")
    common.add_json(m)
    m.set_defaults(func=run_mirror)


def _read(path: Path, what: str) -> str:
    try:
        return common.read_bytes(path, what).decode()
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{what} {path} is not UTF-8 text") from exc


def run_verify(args: argparse.Namespace) -> int:
    verifier = common.verifier(args.verifier_key)
    lines: list[str] = []
    data: dict[str, Any] = {"entries": []}
    # --tiles given wins over a --server that may only be TRUSTSCORE_SERVER's default.
    with TileClient(args.tiles) if args.tiles else LogClient(args.server) as client:
        log = VerifyingClient(client, verifier)
        signed = _read(args.checkpoint, "checkpoint") if args.checkpoint else client.checkpoint()
        cp = log.open(signed)
        data["checkpoint"] = {"origin": cp.origin, "size": cp.size, "root": b64encode(cp.root)}
        lines.append(f"checkpoint: size {cp.size}, signature by {verifier.name} verified")
        if isinstance(client, TileClient):
            tree = client.verify(cp)
            data["tiles"] = {"fetched": tree.tiles, "entries": tree.entries, "from_api": list(tree.from_api)}
            lines.append(
                f"tiles: the tree of size {cp.size} rebuilt from {tree.tiles} tiles and bundles has the "
                f"checkpoint's root; {tree.entries} entries hash to their level-0 tiles"
            )
            lines += [_from_api(n) for n in tree.from_api]
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
    # An explicit database or tiles win over a --server that may only be TRUSTSCORE_SERVER's default.
    if args.tiles or (args.server and args.data_dir is None and args.database_url is None):
        if not args.verifier_key:
            raise InvalidInput(f"{'--tiles' if args.tiles else '--server'} needs --verifier-key")
        verifier = common.verifier(args.verifier_key)
        report = _fsck_tiles(args.tiles, verifier) if args.tiles else _fsck_http(args.server, verifier)
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


def _fsck_tiles(source: str, verifier: note.Verifier) -> audit.FsckReport:
    """fsck of a tiled log, a bundle at a time: every entry re-verified, its leaf hash compared with the
    level-0 tile, the tree rebuilt from the entries and from the tiles, both against the checkpoint."""
    with TileClient(source) as client:
        cp = checkpoint.open_checkpoint(client.checkpoint(), verifier, None)
        check = audit.Fsck([(cp.size, cp.root)], _trusted(verifier))
        tree = tiles.TreeCheck(cp.size, client.hashes)
        try:
            for tile in tiles.tiles_for_size(cp.size, 0):
                hashes = client.hashes(tile)
                tree.feed(hashes)
                check.feed(client.bundle(Tile(None, tile.index, tile.width)), hashes)
            tree.finish(cp.root)
        except ProofError as exc:
            check.report.problems.append(f"tiles: {exc.message}")
    return check.finish()


def run_mirror(args: argparse.Namespace) -> int:
    if args.out.exists() and not args.out.is_dir():
        raise InvalidInput(f"--out {args.out} is not a directory")
    verifier = common.verifier(args.verifier_key)
    with TileClient(args.tiles) as client:
        signed = client.checkpoint()
        cp = checkpoint.open_checkpoint(signed, verifier, None)
        tree = client.verify(cp, save=args.out)
    common.write_bytes(args.out / "checkpoint", signed.encode(), "checkpoint")
    common.emit(
        args,
        {"size": cp.size, "root": b64encode(cp.root), "resources": tree.tiles + 1, "out": str(args.out),
         "bundles_not_mirrored": list(tree.from_api)},
        [f"mirrored the tree of size {cp.size} ({tree.tiles} tiles and bundles, all verified) to {args.out}",
         *(_from_api(n) + ": not mirrored" for n in tree.from_api)],
    )  # fmt: skip
    return 0


def _from_api(bundle: int) -> str:
    first = tiles.WIDTH * bundle
    return (
        f"warning: bundle {bundle} (entries {first}..) holds an entry over 65,535 bytes, which tlog-tiles "
        "cannot carry: its entries were read from the server's entries API and checked against their "
        "level-0 tile"
    )
