"""Recompute a logged re-verification's seed and samples, so anyone can check the server drew them fairly."""

from __future__ import annotations

from collections.abc import Sequence

from trustscore.errors import VerificationError
from trustscore.kinds.reverification import Reverification
from trustscore.kinds.reverification.sampling import (
    FRESH_ITEM_PREFIX,
    private_ref,
    private_seed,
    sample,
    seed,
    seed_size,
)


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
