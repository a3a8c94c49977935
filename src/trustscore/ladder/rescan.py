"""What a rule change moves: rows re-derived under a new rule, compared with the rows as recorded.

Pure and read-only: the recorded rows keep the rule they were written under; this only reports, as the
source document's table does, who kept the verified rungs and why the others lost them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence

import msgspec

from trustscore.errors import InvalidInput
from trustscore.ladder.rows import LadderRow
from trustscore.ladder.rule import RUNG_NAMES, VERIFIED_RUNG


class Moved(msgspec.Struct, frozen=True, kw_only=True):
    """One line of the table: how many rows, their share of the rows that were verified, and why."""

    outcome: str  # kept | lost | gained
    reason: str
    rows: int
    share: float | None


class Rescan(msgspec.Struct, frozen=True, kw_only=True):
    from_rules: list[str]
    rule: str
    rows: int
    verified_before: int
    verified_after: int
    moved: int  # rows whose rung changed at all
    table: list[Moved]


def rescan(recorded: Sequence[LadderRow], rederived: Sequence[LadderRow], rule: str) -> Rescan:
    """Compare ``recorded`` rows with the same log's rows ``rederived`` under ``rule`` (pairwise, in log
    order: the same statements give the same rows in the same order under every rule)."""
    if [(r.index, r.dimension, r.cover) for r in recorded] != [
        (r.index, r.dimension, r.cover) for r in rederived
    ]:
        raise InvalidInput("the re-derived rows are not of the same log prefix as the recorded ones")
    kept: Counter[str] = Counter()
    lost: Counter[str] = Counter()
    gained: Counter[str] = Counter()
    moved = 0
    for old, new in zip(recorded, rederived, strict=True):
        moved += old.rung != new.rung
        was, now = old.rung >= VERIFIED_RUNG, new.rung >= VERIFIED_RUNG
        if was and now:
            kept[f"kept {RUNG_NAMES[new.rung]}: {new.summary}"] += 1
        elif was:
            lost[f"now {RUNG_NAMES[new.rung]}: {new.summary}"] += 1
        elif now:
            gained[f"now {RUNG_NAMES[new.rung]}: {new.summary}"] += 1
    before = sum(kept.values()) + sum(lost.values())

    def lines(outcome: str, counts: Counter[str], denominator: int) -> list[Moved]:
        return [
            Moved(outcome=outcome, reason=why, rows=n, share=n / denominator if denominator else None)
            for why, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
        ]

    return Rescan(
        from_rules=sorted({r.rule for r in recorded}),
        rule=rule,
        rows=len(recorded),
        verified_before=before,
        verified_after=sum(kept.values()) + sum(gained.values()),
        moved=moved,
        table=lines("kept", kept, before) + lines("lost", lost, before) + lines("gained", gained, before),
    )
