"""Small helpers shared by command modules: the verifier key, ``-`` for stdin/stdout, ``--json``."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from trustscore.errors import InvalidInput
from trustscore.ledger import keys, note

#: The file name that means standard input (where a file is read) or standard output (where written).
STDIO = "-"


def verifier(arg: str) -> note.Verifier:
    """The log verifier key given on the command line, as text or as a file holding it."""
    path = Path(arg)
    text = path.read_text().strip() if path.is_file() else arg.strip()
    return note.parse_verifier_key(text)


def read_bytes(path: Path | str, what: str = "file") -> bytes:
    """The bytes of ``path``, or of standard input for ``-``; a one-line error when it cannot be read."""
    if str(path) == STDIO:
        return sys.stdin.buffer.read()
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        raise InvalidInput(f"cannot read {what} {path}: {exc.strerror}") from exc


def write_bytes(path: Path | str, data: bytes, what: str = "file") -> None:
    """Write ``data`` to ``path``, or to standard output for ``-``."""
    if str(path) == STDIO:
        sys.stdout.buffer.write(data)
        sys.stdout.buffer.flush()
        return
    try:
        Path(path).write_bytes(data)
    except OSError as exc:
        raise InvalidInput(f"cannot write {what} {path}: {exc.strerror}") from exc


def add_json(p: argparse.ArgumentParser) -> None:
    """The ``--json`` flag: print one JSON object instead of text lines."""
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")


def emit(args: argparse.Namespace, data: dict[str, Any], lines: Sequence[str]) -> None:
    """Print ``data`` as one JSON object with ``--json``, else ``lines``. With ``-`` as an output file,
    the text goes to stderr so that stdout holds only the data written there."""
    data_on_stdout = any(str(v) == STDIO for k, v in vars(args).items() if k.endswith("out"))
    stream = sys.stderr if data_on_stdout else sys.stdout
    if getattr(args, "json", False):
        print(json.dumps(data, ensure_ascii=False), file=stream)
        return
    for line in lines:
        print(line, file=stream)


def bounded(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: an integer in ``[low, high]`` (a usage error otherwise, exit 2)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is not in {low}..{high}")
        return value

    return parse


def agent_id(text: str) -> str:
    """An agent id given on the command line (``ts1_`` + hex), checked before it goes into a URL."""
    if not keys.is_key_id(text):
        raise InvalidInput(f"{text!r} is not an agent id (ts1_ followed by 40 hex digits)")
    return text
