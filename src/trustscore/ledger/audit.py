"""Offline checks of log material, trusting nothing but the log's verifier key: entries, fsck."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import msgspec

from trustscore.errors import InvalidInput, TrustscoreError
from trustscore.ledger import merkle
from trustscore.ledger.submission import CheckedEntry, Prepared, check, prepare


def parse_leaf(leaf: bytes) -> Prepared:
    """A stored leaf as an envelope of a known statement kind (signatures not yet checked)."""
    try:
        raw = msgspec.json.decode(leaf)
    except msgspec.DecodeError as exc:
        raise InvalidInput("leaf is not JSON") from exc
    return prepare(raw)


def verify_leaf(leaf: bytes, resolve: Callable[[str], bytes | None]) -> CheckedEntry:
    """Verify a stored leaf: it parses as an envelope of a known kind and every signature verifies."""
    return check(parse_leaf(leaf), resolve)


#: Stored columns found wrong that fsck lists one by one (a column rewritten for the whole log would
#: otherwise list five problems an entry); the rest are counted.
MAX_COLUMN_PROBLEMS = 20


class Columns(NamedTuple):
    """What a database keeps beside each leaf, derived from it at append: lookups (an agent's cards by
    subject and kind), the /log list and the duplicate and replay checks read these without the leaf."""

    statement_hash: bytes
    signer: str
    nonce: str
    kind: str
    subject: str


@dataclass
class FsckReport:
    entries: int
    checkpoint_size: int
    root_matches: bool = False
    problems: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.problems


class Fsck:
    """Re-derive the tree from every entry, fed in log order in batches, in memory bounded by the batch.

    ``checkpoints`` are (size, root) pairs already verified against the log key, any order; the latest
    is the largest. Every entry's signatures are re-verified with keys found in the log itself (a key
    counts only after the entry registering it) and the ``trusted`` keys (the log key, which co-signs
    the server's own service cards). The tree is carried as its frontier (:func:`merkle.extend`), so a
    log of 10^7 entries needs O(log n) hashes besides the registered keys; :meth:`feed` returns the tree
    nodes each batch completes (within the latest checkpoint), for a caller holding stored nodes to
    compare with :meth:`compare_nodes`.
    """

    def __init__(self, checkpoints: Sequence[tuple[int, bytes]], trusted: Mapping[str, bytes] | None = None):
        self.latest = max((s for s, _ in checkpoints), default=0)
        self.report = FsckReport(entries=0, checkpoint_size=self.latest)
        self._due = sorted(checkpoints, reverse=True)  # pop() yields the smallest size still to check
        self._keys = dict(trusted or {})
        self._frontier: list[bytes] = []
        self._nodes_ok = True
        self._column_problems = 0  # stored columns found wrong (the first MAX_COLUMN_PROBLEMS listed)
        while self._due and self._due[-1][0] == 0:
            self._check_root(*self._due.pop())

    @property
    def size(self) -> int:
        return self.report.entries

    def feed(
        self,
        leaves: Sequence[bytes],
        stored_leaf_hashes: Sequence[bytes] | None = None,
        stored_columns: Sequence[Columns] | None = None,
    ) -> list[tuple[int, int, bytes]]:
        """Check the next ``leaves`` (from index :attr:`size` on), and the hashes and columns stored beside
        them if given; return the nodes they complete."""
        start = self.size
        hashes = [merkle.leaf_hash(leaf) for leaf in leaves]
        for offset, leaf in enumerate(leaves):
            i = start + offset
            try:
                entry = verify_leaf(leaf, self._keys.get)
            except TrustscoreError as exc:
                self.report.problems.append(f"entry {i}: {exc.message}")
            else:
                if entry.introduces_key is not None:
                    self._keys.setdefault(entry.subject, entry.introduces_key)
                if stored_columns is not None:
                    self._compare_columns(i, entry, stored_columns[offset])
            if stored_leaf_hashes is not None and stored_leaf_hashes[offset] != hashes[offset]:
                self.report.problems.append(f"entry {i}: stored leaf hash does not match its leaf")
        completed: list[tuple[int, int, bytes]] = []
        position = 0
        while position < len(hashes) and self.size < self.latest:
            # Grow the tree up to the next checkpoint (or the batch's end), then check that root.
            stop = min(len(hashes), position + self._due[-1][0] - self.size)
            done, self._frontier = merkle.extend(self.size, self._frontier, hashes[position:stop])
            completed.extend(done)
            self.report.entries += stop - position
            position = stop
            while self._due and self._due[-1][0] == self.size:
                self._check_root(*self._due.pop())
        self.report.entries += len(hashes) - position  # entries beyond the latest checkpoint
        return completed

    def _compare_columns(self, i: int, entry: CheckedEntry, stored: Columns) -> None:
        for name, value in stored._asdict().items():
            derived = getattr(entry, name)
            if value != derived:
                self._column_problems += 1
                if self._column_problems <= MAX_COLUMN_PROBLEMS:
                    shown = derived.hex() if isinstance(derived, bytes) else repr(derived)
                    self.report.problems.append(
                        f"entry {i}: stored {name} does not match its leaf's ({shown})"
                    )

    def compare_nodes(
        self, completed: Sequence[tuple[int, int, bytes]], stored: Mapping[tuple[int, int], bytes]
    ) -> None:
        """Report the first completed node that ``stored`` lacks or holds otherwise (once per run)."""
        if not self._nodes_ok:
            return
        for level, index, h in completed:
            if stored.get((level, index)) != h:
                self.report.problems.append(f"stored tree node {(level, index)} is missing or wrong")
                self._nodes_ok = False
                return

    def finish(self) -> FsckReport:
        """The report, once every entry has been fed."""
        if self.latest > self.size:
            self.report.problems.append(f"checkpoint covers {self.latest} entries but only {self.size} exist")
        if self._column_problems > MAX_COLUMN_PROBLEMS:
            more = self._column_problems - MAX_COLUMN_PROBLEMS
            self.report.problems.append(f"{more} more stored columns do not match their leaves")
        return self.report

    def _check_root(self, size: int, root: bytes) -> None:
        if self._root() != root:
            self.report.problems.append(f"checkpoint at size {size} does not match the entries")
        elif size == self.latest:
            self.report.root_matches = True

    def _root(self) -> bytes:
        if not self._frontier:
            return merkle.EMPTY_ROOT
        root = self._frontier[-1]
        for left in reversed(self._frontier[:-1]):
            root = merkle.node_hash(left, root)
        return root


def fsck(
    leaves: Sequence[bytes],
    checkpoints: Sequence[tuple[int, bytes]],
    stored_leaf_hashes: Sequence[bytes] | None = None,
    stored_nodes: Mapping[tuple[int, int], bytes] | None = None,
    trusted: Mapping[str, bytes] | None = None,
) -> FsckReport:
    """:class:`Fsck` over entries held in memory (tests, small logs), in one batch."""
    check = Fsck(checkpoints, trusted)
    completed = check.feed(leaves, stored_leaf_hashes)
    if stored_nodes is not None:
        check.compare_nodes(completed, stored_nodes)
    return check.finish()
