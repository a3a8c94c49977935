"""C2SP transparency-log checkpoints (https://c2sp.org/tlog-checkpoint) as signed notes.

The note text is ``<origin>\\n<tree size>\\n<base64 root hash>\\n`` followed by optional, opaque,
non-empty extension lines (we never write any, but keep those we read). See ``docs/merkle.md``.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from trustscore.canonical import b64decode, b64encode
from trustscore.errors import InconsistencyError, InvalidInput, ProofError, VerificationError
from trustscore.ledger import merkle
from trustscore.ledger.keys import SigningKey
from trustscore.ledger.note import Verifier, open_note, sign_note

MAX_TREE_SIZE = 2**64 - 1
_DECIMAL = re.compile(r"0|[1-9][0-9]*")


@dataclass(frozen=True)
class Checkpoint:
    """A log's tree head: its origin, tree size and RFC 6962 root hash (plus any extension lines)."""

    origin: str
    size: int
    root: bytes
    extensions: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not self.origin or "\n" in self.origin:
            raise InvalidInput("a checkpoint origin is one non-empty line")
        if (
            isinstance(self.size, bool)
            or not isinstance(self.size, int)
            or not 0 <= self.size <= MAX_TREE_SIZE
        ):
            raise InvalidInput(f"checkpoint tree size {self.size!r} is not a uint64")
        if len(self.root) != merkle.HASH_SIZE:
            raise InvalidInput(f"checkpoint root hash is {len(self.root)} bytes, not {merkle.HASH_SIZE}")
        if self.size == 0 and self.root != merkle.EMPTY_ROOT:
            raise InvalidInput("a checkpoint of size 0 must carry the empty tree's root, SHA-256('')")
        if any(not line or "\n" in line for line in self.extensions):
            raise InvalidInput("checkpoint extension lines must be single non-empty lines")

    def body(self) -> str:
        """The note text: origin, size, base64 root and extension lines, each ending in a newline."""
        lines = [self.origin, str(self.size), b64encode(self.root), *self.extensions]
        return "".join(line + "\n" for line in lines)


def parse_checkpoint(text: str, expected_origin: str | None = None) -> Checkpoint:
    """Parse a checkpoint note text strictly; raise :class:`InvalidInput` if it is malformed.

    An ``expected_origin`` that differs raises :class:`VerificationError`.
    """
    if not text.endswith("\n"):
        raise InvalidInput("checkpoint text must end with a newline")
    lines = text[:-1].split("\n")
    if len(lines) < 3:
        raise InvalidInput("checkpoint text has fewer than three lines")
    origin, size_text, root_text, *extensions = lines
    if not _DECIMAL.fullmatch(size_text):
        raise InvalidInput("checkpoint tree size must be decimal without leading zeros")
    root = b64decode(root_text, what="checkpoint root hash")
    if b64encode(root) != root_text:
        raise InvalidInput("checkpoint root hash is not canonical base64")
    checkpoint = Checkpoint(origin, int(size_text), root, tuple(extensions))
    if expected_origin is not None and origin != expected_origin:
        raise VerificationError(f"checkpoint is for log {origin!r}, not {expected_origin!r}")
    return checkpoint


def sign_checkpoint(checkpoint: Checkpoint, signing_key: SigningKey, name: str | None = None) -> str:
    """The signed note of ``checkpoint``; the key name defaults to the origin, as C2SP recommends."""
    return sign_note(checkpoint.body(), checkpoint.origin if name is None else name, signing_key)


def open_checkpoint(signed: str | bytes, verifier: Verifier, expected_origin: str | None) -> Checkpoint:
    """Verify ``verifier``'s signature on a signed checkpoint, then parse it strictly.

    Raises :class:`SignatureError`, :class:`InvalidInput`, or :class:`VerificationError` when the
    origin is not ``expected_origin`` (pass ``None`` only when any origin is acceptable).
    """
    return parse_checkpoint(open_note(signed, verifier), expected_origin)


def verify_consistent(old: Checkpoint, new: Checkpoint, proof: Sequence[bytes]) -> Checkpoint:
    """Return ``new`` if ``proof`` shows it extends ``old``; else raise :class:`InconsistencyError`.

    The error carries both checkpoints and the proof; the underlying reason is its ``__cause__``.
    Every tree extends the empty tree (whose root :class:`Checkpoint` enforces), so from size 0 the
    proof must be empty.
    """
    if old.origin != new.origin:
        raise InvalidInput(f"checkpoints of different logs: {old.origin!r} and {new.origin!r}")

    def inconsistent(message: str) -> InconsistencyError:
        return InconsistencyError(message, old=old, new=new, proof=list(proof))

    if old.size == 0:
        if proof:
            raise inconsistent("a consistency proof from the empty tree must be empty")
        return new
    try:
        merkle.verify_consistency(old.size, new.size, proof, old.root, new.root)
    except ProofError as exc:
        raise inconsistent(
            f"checkpoints {old.size} and {new.size} are not consistent: {exc.message}"
        ) from exc
    return new
