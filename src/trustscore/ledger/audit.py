"""Offline checks of log material, trusting nothing but the log's verifier key: entries, fsck."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

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


@dataclass
class FsckReport:
    entries: int
    checkpoint_size: int
    root_matches: bool = False
    problems: list[str] = field(default_factory=list)

    @property
    def clean(self) -> bool:
        return not self.problems


def fsck(
    leaves: Sequence[bytes],
    checkpoints: Sequence[tuple[int, bytes]],
    stored_leaf_hashes: Sequence[bytes] | None = None,
    stored_nodes: Mapping[tuple[int, int], bytes] | None = None,
    trusted: Mapping[str, bytes] | None = None,
) -> FsckReport:
    """Re-derive the tree from every entry and compare it with the checkpoints (and stored nodes).

    ``checkpoints`` are (size, root) pairs already verified against the log key, any order; the
    latest is the largest. Every entry's signatures are re-verified with keys found in the log itself
    and the ``trusted`` keys (the log key, which co-signs the server's own service cards).
    """
    latest = max((s for s, _ in checkpoints), default=0)
    report = FsckReport(entries=len(leaves), checkpoint_size=latest)
    keys = dict(trusted or {})  # grows in log order: a key counts only after the entry registering it
    hashes = [merkle.leaf_hash(leaf) for leaf in leaves]
    for i, leaf in enumerate(leaves):
        try:
            entry = verify_leaf(leaf, keys.get)
        except TrustscoreError as exc:
            report.problems.append(f"entry {i}: {exc.message}")
        else:
            if entry.introduces_key is not None:
                keys.setdefault(entry.subject, entry.introduces_key)
        if stored_leaf_hashes is not None and stored_leaf_hashes[i] != hashes[i]:
            report.problems.append(f"entry {i}: stored leaf hash does not match its leaf")
    if latest > len(leaves):
        report.problems.append(f"checkpoint covers {latest} entries but only {len(leaves)} exist")
        return report
    derived = merkle.complete_nodes(hashes[:latest])
    if stored_nodes is not None:
        for node, h in derived.items():
            if stored_nodes.get(node) != h:
                report.problems.append(f"stored tree node {node} is missing or wrong")
                break
    for size, root in sorted(checkpoints):
        if merkle.root_from_nodes(size, derived) != root:
            report.problems.append(f"checkpoint at size {size} does not match the entries")
        elif size == latest:
            report.root_matches = True
    return report
