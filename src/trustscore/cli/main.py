"""Entry point of the ``trustscore`` command.

Each command module exposes ``register(subparsers)``, which adds its sub-command and sets
``func=handler`` where ``handler(args) -> int``. Errors from :mod:`trustscore.errors` are printed as one
line on stderr with a non-zero exit; nothing prints a traceback at a user.

Exit codes (docs/sdk.md): 0 success; 1 the input or the request is wrong (bad file, refused by the
server, not found); 2 usage (unknown command or flag, from argparse); 3 verification failed (a
signature, proof, checkpoint or recomputation did not check out); 4 the server or database could not be
reached or is busy (retry later); 130 interrupted.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
from collections.abc import Sequence
from typing import Any, NoReturn

from trustscore.cli import numpy_cpu
from trustscore.cli.settings import ClientSettings, apply_defaults, from_env
from trustscore.client import RemoteError
from trustscore.errors import Busy, RateLimited, StorageError, TrustscoreError, VerificationError

EXIT_ERROR = 1
EXIT_USAGE = 2
EXIT_VERIFICATION = 3
EXIT_UNAVAILABLE = 4


def exit_code(exc: TrustscoreError) -> int:
    """The documented exit code of an error: verification failures and unavailability stand apart."""
    if isinstance(exc, VerificationError):
        return EXIT_VERIFICATION
    if isinstance(exc, StorageError | Busy | RateLimited):
        return EXIT_UNAVAILABLE
    if isinstance(exc, RemoteError) and (exc.http_status >= 500 or exc.http_status == 429):
        return EXIT_UNAVAILABLE
    return EXIT_ERROR


COMMAND_MODULES = (
    "trustscore.cli.keys",
    "trustscore.cli.serve",
    "trustscore.cli.agent",
    "trustscore.cli.log",
    "trustscore.cli.score",
    "trustscore.cli.exam",
    "trustscore.cli.evidence",
    "trustscore.cli.rating",
    "trustscore.cli.leaderboard",
    "trustscore.cli.settle",
    "trustscore.cli.onboard",
    "trustscore.cli.demo",
    "trustscore.cli.operator",
    "trustscore.cli.ladder",
    "trustscore.cli.sessions",
    "trustscore.cli.scope",
    "trustscore.cli.mcp",
    "trustscore.cli.reverify",
    "trustscore.cli.webhooks",
)


class DefaultsFormatter(argparse.HelpFormatter):
    """Append ``(default: X)`` to a flag's help unless it has no default or its help already says it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if default in (None, False, [], argparse.SUPPRESS) or "default" in text or not action.option_strings:
            return text
        return f"{text} (default: %(default)s)"


class Parser(argparse.ArgumentParser):
    """Every command's help shows each flag's default; a usage mistake is one line, like every error."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("formatter_class", DefaultsFormatter)
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        """An unknown command or flag, or a missing or malformed one: one line saying which and where the
        command's help is (argparse would print the whole usage block first), exit 2."""
        self.exit(EXIT_USAGE, f"trustscore: error: {message} (see: {self.prog} --help)\n")


def build_parser(settings: ClientSettings | None = None) -> argparse.ArgumentParser:
    """The whole command line; ``--server``, ``--verifier-key`` and ``--key`` default from ``settings``
    (default: the environment, :mod:`trustscore.cli.settings`)."""
    parser = Parser(prog="trustscore", description="A public credit bureau for AI agents.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND", parser_class=Parser)
    for name in COMMAND_MODULES:
        importlib.import_module(name).register(sub)
    apply_defaults(parser, from_env() if settings is None else settings)
    return parser


def version() -> str:
    """The installed package's version."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("trustscore")
    except PackageNotFoundError:
        return "unknown (not installed)"


def main(argv: Sequence[str] | None = None) -> int:
    numpy_cpu.configure(os.environ)  # before any command imports numpy (numpy_cpu.py says why)
    try:
        parser = build_parser()
    except TrustscoreError as exc:  # a bad TRUSTSCORE_* variable
        print(f"trustscore: error: {exc.message}", file=sys.stderr)
        return EXIT_USAGE
    args = parser.parse_args(argv)
    try:
        code: int = args.func(args)
        sys.stdout.flush()  # here, where a reader that went away is caught, not at the exit's flush
    except TrustscoreError as exc:
        print(f"trustscore: error: {exc.message}", file=sys.stderr)
        return exit_code(exc)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader of our output went away (| head): nothing more to say
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at exit
        return EXIT_ERROR
    # Last resorts, each one line (never a traceback): the commands read what servers answer and what
    # files hold, and one of another shape than they read fails where it is first used. With
    # TRUSTSCORE_DEBUG set the traceback is printed instead (a bug looks the same from outside).
    except (RecursionError, KeyError, TypeError, AttributeError, IndexError, ValueError, OSError) as exc:
        if os.environ.get("TRUSTSCORE_DEBUG", "").strip().lower() in ("1", "true", "yes"):
            raise
        print(f"trustscore: error: {_last_resort(exc)}", file=sys.stderr)
        return EXIT_ERROR
    return code


def _last_resort(exc: Exception) -> str:
    """The one line for an error no command turned into a TrustscoreError."""
    if isinstance(exc, RecursionError):
        return "the input is nested too deeply to read"
    if isinstance(exc, OSError):  # a file or directory that could not be read or written
        return str(exc)
    reason = f"{type(exc).__name__}: {str(exc)[:200]}"
    return f"an answer or file is not in the shape expected ({reason}; TRUSTSCORE_DEBUG=1 shows where)"


if __name__ == "__main__":
    sys.exit(main())
