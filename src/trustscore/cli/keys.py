"""``trustscore keygen``: make an Ed25519 key file."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from trustscore.canonical import b64encode
from trustscore.cli import common
from trustscore.ledger import keys


def register(sub: Any) -> None:
    p: argparse.ArgumentParser = sub.add_parser(
        "keygen", help="write a new Ed25519 private key file (mode 0600)"
    )
    p.add_argument("--out", type=Path, required=True, help="path of the new key file (never overwritten)")
    common.add_json(p)
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    key = keys.SigningKey.generate()
    keys.write_key_file(args.out, key)
    public = b64encode(key.public_key)
    common.emit(
        args,
        {"id": key.id, "public_key": public, "key_file": str(args.out)},
        [f"id: {key.id}", f"public_key: {public}", f"key file: {args.out}"],
    )
    return 0
