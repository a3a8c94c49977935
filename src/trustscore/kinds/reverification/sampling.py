"""The re-verification seed and sample: deterministic, recomputable by anyone from the log.

The seed of a run is SHA-256 over a domain-separated encoding of the root of a tree of the log that
contains the report *and the server's graded evidence right after it* (size ``report_index + 2`` for the
run that follows the report), the report's statement hash and the agent id. The sample ranks the report's
item ids by SHA-256(seed || item_id) and takes the ``k`` smallest. No ``random`` state is involved, so
``reverify/recheck.py`` can recompute both from the log alone. Why size ``report_index + 2``: docs/reverification.md.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from trustscore.errors import InvalidInput

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
