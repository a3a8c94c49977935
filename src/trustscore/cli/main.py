"""Entry point of the ``trustscore`` command.

Each command module exposes ``register(subparsers)``, which adds its sub-command and sets
``func=handler`` where ``handler(args) -> int``. Errors from :mod:`trustscore.errors` are printed as one
line on stderr with a non-zero exit; nothing prints a traceback at a user.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from trustscore.errors import TrustscoreError

COMMAND_MODULES = (
    "trustscore.cli.keys",
    "trustscore.cli.serve",
    "trustscore.cli.agent",
    "trustscore.cli.log",
    "trustscore.cli.score",
    "trustscore.cli.exam",
    "trustscore.cli.evidence",
    "trustscore.cli.rating",
    "trustscore.cli.demo",
    "trustscore.cli.operator",
    "trustscore.reverify.cli",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="trustscore", description="A public credit bureau for AI agents.")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
    except TrustscoreError as exc:
        print(f"trustscore: error: {exc.message}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return code


if __name__ == "__main__":
    sys.exit(main())
