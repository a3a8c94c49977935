"""The re-verification seed and sample: deterministic, recomputable by anyone from the log.

The seed of a run is SHA-256 over a domain-separated encoding of the root of a tree of the log that
contains the report *and the server's graded evidence right after it* (size ``report_index + 2`` for the
run that follows the report), the report's statement hash and the agent id. The sample ranks the report's
item ids by SHA-256(seed || item_id) and takes the ``k`` smallest. No ``random`` state is involved, so
:func:`recheck` can recompute both from the log alone. Why size ``report_index + 2``: docs/reverification.md.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from trustscore.errors import InvalidInput, VerificationError

if TYPE_CHECKING:  # the kind imports this module; importing it back at run time would be a cycle
    from trustscore.ledger.reverification import Reverification

SEED_DOMAIN = b"trustscore/reverify/seed/v1\x00"
PRIVATE_DOMAIN = b"trustscore/reverify/private/v1\x00"
HASH_SIZE = 32
MAX_AGENT_BYTES = 0xFFFF


def seed(checkpoint_root: bytes, report_sha256: bytes, agent: str) -> bytes:
    """SHA-256(SEED_DOMAIN || root (32 bytes) || report_sha256 (32 bytes) || u16be len(agent) || agent)."""
    if len(checkpoint_root) != HASH_SIZE or len(report_sha256) != HASH_SIZE:
        raise InvalidInput("seed needs a 32-byte checkpoint root and a 32-byte report hash")
    name = agent.encode()
    if not name or len(name) > MAX_AGENT_BYTES:
        raise InvalidInput("seed needs a non-empty agent id")
    return hashlib.sha256(
        SEED_DOMAIN + checkpoint_root + report_sha256 + len(name).to_bytes(2, "big") + name
    ).digest()


def private_seed(run_seed: bytes) -> bytes:
    """The seed of the private-tier sample, separated from the public one: SHA-256(PRIVATE_DOMAIN || seed)."""
    return hashlib.sha256(PRIVATE_DOMAIN + run_seed).digest()


def rank(item_id: str, run_seed: bytes) -> bytes:
    return hashlib.sha256(run_seed + item_id.encode()).digest()


def sample(item_ids: Sequence[str], k: int, run_seed: bytes) -> list[str]:
    """The ``k`` ids with the smallest SHA-256(seed || id), in rank order (all of them if ``k`` >= len)."""
    if k < 0:
        raise InvalidInput("sample size k must be >= 0")
    if len(set(item_ids)) != len(item_ids):
        raise InvalidInput("sample: an item id appears twice")
    return sorted(item_ids, key=lambda i: (rank(i, run_seed), i))[:k]


#: Private items whose id starts so are fresh instances generated for the run (reverify/fresh.py), not
#: drawn from a private set; they follow the drawn ones.
FRESH_ITEM_PREFIX = "fresh-"


def private_ref(exam: str, item_id: str) -> str:
    """How a private item is named in the private pool and sample: ``name@version:item_id``."""
    return f"{exam}:{item_id}"


def seed_size(report_index: int) -> int:
    """The tree size whose root seeds the run that follows a report: the report plus the entry after it."""
    return report_index + 2


def recheck(
    *,
    report_index: int,
    report_sha256: bytes,
    report_item_ids: Sequence[str],
    agent: str,
    checkpoint_size: int,
    checkpoint_root: bytes,
    statement: Reverification,
    private_pool: Sequence[str] | None = None,
) -> list[str]:
    """Recompute a run's seed and sample from the report and the (already proven) checkpoint.

    Returns the recomputed public sample, or raises :class:`VerificationError` naming every difference.
    ``private_pool`` (``name@version:item_id`` refs of the private sets; operators and auditors only) also
    rechecks the private sample. The caller proves ``checkpoint_root`` is the log's root at
    ``checkpoint_size`` (a consistency proof to a signed checkpoint).
    """
    s = statement
    problems: list[str] = []
    if (s.agent, s.report_index, s.report_sha256) != (agent, report_index, report_sha256.hex()):
        problems.append(
            f"statement names report {s.report_index} ({s.report_sha256}) of {s.agent}, "
            f"not {report_index} ({report_sha256.hex()}) of {agent}"
        )
    if s.checkpoint_size != checkpoint_size:
        problems.append(f"statement's checkpoint_size {s.checkpoint_size} is not {checkpoint_size}")
    if s.checkpoint_size < seed_size(report_index):
        problems.append(f"checkpoint_size {s.checkpoint_size} does not cover entry {report_index + 1}")
    if s.trigger == "report" and s.checkpoint_size != seed_size(report_index):
        problems.append(f"a report-triggered run must use size {seed_size(report_index)}")
    expected_seed = seed(checkpoint_root, report_sha256, agent)
    if s.seed != expected_seed.hex():
        problems.append(f"seed {s.seed} differs from the recomputed {expected_seed.hex()}")
    expected = sample(report_item_ids, len(s.items), expected_seed)
    got = [i.item_id for i in s.items]
    if got != expected:
        problems.append(f"sampled items {got} differ from the recomputed sample {expected}")
    if private_pool is not None:
        drawn = [p for p in s.private_items if not p.item_id.startswith(FRESH_ITEM_PREFIX)]
        want = sample(private_pool, len(drawn), private_seed(expected_seed))
        have = [private_ref(p.exam, p.item_id) for p in drawn]
        if have != want:
            problems.append(f"private sample {have} differs from the recomputed {want}")
    if problems:
        raise VerificationError("re-verification sample does not recompute: " + "; ".join(problems))
    return expected
