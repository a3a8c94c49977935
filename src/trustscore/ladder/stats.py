"""Outcome rates with their sample size, from ladder rows. Pure: the API and an offline export agree.

* **Strongest kept.** Rows of one agent, dimension and ``cover`` cover the same thing. A reporter's later
  row replaces its own earlier one (a correction); between reporters the stronger row is kept (a confirmed
  or server row over a self-attested one, then the higher rung, then the later), never merely the newer.
  A self-attested row's rung is the agent's own account (a "CI confirmation" it lists is its word), so it
  never stands over what another reporter said of the same work (until 2026-12-07 rung came first: an
  agent's record naming a made-up CI success, rung 5, replaced a CI's confirmed failure, rung 0).
* **Verified** = rung ≥ 3. A group's ``rate`` is verified / n over its rows, with ``n`` beside it.
* A group with fewer than ``floor`` rows is **suppressed** (``rate`` null, reason ``below_floor``); a group
  whose rows carry nothing that could detect an outcome has ``rate`` null with ``no_outcome_detection``
  — not zero: null says nothing parses outcomes there, zero would say the work always fails.
* The stats never say pass or fail, and compare nobody with anybody.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final, Literal

import msgspec

from trustscore.errors import InvalidInput
from trustscore.ladder.rows import LadderRow
from trustscore.ladder.rule import RUNG_NAMES, VERIFIED_RUNG

GroupBy = Literal["model", "adapter", "exam", "marketplace", "repo"]
GROUP_BY: Final = ("model", "adapter", "exam", "marketplace", "repo")
DEFAULT_FLOOR: Final = 20
MAX_FLOOR: Final = 1_000_000
#: Groups in one answer at most (and by default): model and adapter names are free text, so the groups
#: are as many as the names ever reported; an answer names the ``next`` page's start (2026-12-07).
MAX_GROUPS: Final = 1_000
#: The longest ``after``: longer than any group name (a work record's model or adapter, an exam: 200
#: characters at most; a marketplace's key id), with room to spare.
MAX_GROUP_NAME: Final = 2_048
BELOW_FLOOR: Final = "below_floor"
NO_OUTCOME_DETECTION: Final = "no_outcome_detection"
#: How rows of one cover rank (then the higher rung, then the later): another reporter's over the agent's own,
#: whatever its standing (a CI party cannot have standing, and its failure must stand over the agent's
#: made-up success); and whether a row counts as ``confirmed`` (a reporter with standing, or the server).
_STRENGTH = {"self": 0, "unvouched": 1, "confirmed": 1, "server": 1}
_CONFIRMS = {"self": 0, "unvouched": 0, "confirmed": 1, "server": 1}


def strongest(rows: Iterable[LadderRow]) -> list[LadderRow]:
    """The rows that stand (module docstring), in log order."""
    latest: dict[tuple[str, str, str, str | None], LadderRow] = {}
    for r in rows:
        k = (r.agent, r.dimension, r.cover, r.issuer)
        old = latest.get(k)
        if old is None or (r.index, r.seq or 0) >= (old.index, old.seq or 0):
            latest[k] = r
    best: dict[tuple[str, str, str], LadderRow] = {}
    for r in latest.values():
        k3 = (r.agent, r.dimension, r.cover)
        old = best.get(k3)
        if old is None or _strength(r) > _strength(old):
            best[k3] = r
    return sorted(best.values(), key=lambda r: (r.index, r.seq if r.seq is not None else -1))


def _strength(r: LadderRow) -> tuple[int, int, int, int]:
    return (_STRENGTH[r.attested], r.rung, r.index, r.seq if r.seq is not None else -1)


class Distribution(msgspec.Struct, frozen=True, kw_only=True):
    """Rows per rung (every rung named, zeros included), verified rows and ``n``; ``rate`` null when
    suppressed or when nothing detects outcomes, with the reason."""

    n: int
    verified: int | None
    rate: float | None
    reason: str | None
    rungs: dict[str, int] | None
    confirmed: int | None  # rows confirmed by someone other than the agent (or the server's own)


@dataclass(frozen=True)
class Counts:
    """What a :class:`Distribution` reads of its rows, whatever the floor: rows per rung (in
    :data:`RUNG_NAMES` order), rows confirmed by someone other than the agent, whether any row detects
    outcomes."""

    rungs: tuple[int, ...]
    confirmed: int
    detected: bool

    @classmethod
    def of(cls, rows: Iterable[LadderRow]) -> Counts:
        rungs = [0] * len(RUNG_NAMES)
        confirmed, detected = 0, False
        for r in rows:
            rungs[r.rung] += 1
            confirmed += _CONFIRMS[r.attested]
            detected = detected or r.outcome_detected
        return cls(tuple(rungs), confirmed, detected)

    def distribution(self, floor: int) -> Distribution:
        """Nothing detecting outcomes comes first (null whatever the size), then the floor."""
        n = sum(self.rungs)
        rungs = dict(zip(RUNG_NAMES, self.rungs, strict=True))
        if not self.detected:
            return Distribution(
                n=n,
                verified=None,
                rate=None,
                reason=NO_OUTCOME_DETECTION,
                rungs=rungs,
                confirmed=self.confirmed,
            )
        if n < floor:
            return Distribution(n=n, verified=None, rate=None, reason=BELOW_FLOOR, rungs=None, confirmed=None)
        verified = sum(self.rungs[VERIFIED_RUNG:])
        return Distribution(
            n=n, verified=verified, rate=verified / n, reason=None, rungs=rungs, confirmed=self.confirmed
        )


def distribution(rows: Sequence[LadderRow], floor: int) -> Distribution:
    """Nothing detecting outcomes comes first (null whatever the size), then the floor."""
    return Counts.of(rows).distribution(floor)


class Group(msgspec.Struct, frozen=True, kw_only=True):
    group: str
    stats: Distribution


class OutcomeStats(msgspec.Struct, frozen=True, kw_only=True):
    group_by: str
    floor: int
    verified_rung: int
    rules: list[str]  # the rule versions the counted rows were written under
    log_size: int
    groups: list[Group]
    next: str | None = None  # more groups follow: ask again with after=next


def check_floor(floor: int) -> int:
    if not 1 <= floor <= MAX_FLOOR:
        raise InvalidInput(f"floor must be 1..{MAX_FLOOR}")
    return floor


def check_group_by(group_by: str) -> GroupBy:
    if group_by not in GROUP_BY:
        raise InvalidInput(f"group_by must be one of {', '.join(GROUP_BY)}")
    return group_by  # type: ignore[return-value]  # checked just above


@dataclass(frozen=True)
class Tally:
    """What outcome stats read of the standing rows of the log prefix ``[0, log_size)``, for every
    grouping at once: per group the :class:`Counts` (a floor is applied when stats are asked), and the
    rule versions the standing rows were written under. One pass over the rows serves every grouping
    and floor (services/ladder.py keeps one)."""

    log_size: int
    rules: tuple[str, ...]
    groups: dict[str, dict[str, Counts]]  # group_by -> group -> counts, in name order
    _sorted: dict[str, list[str]] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, rows: Iterable[LadderRow], log_size: int) -> Tally:
        kept = strongest(rows)
        groups: dict[str, dict[str, Counts]] = {}
        for by in GROUP_BY:
            members: dict[str, list[LadderRow]] = {}
            for r in kept:
                label = getattr(r, by)
                if label is not None:
                    members.setdefault(label, []).append(r)
            groups[by] = {g: Counts.of(members[g]) for g in sorted(members)}
        return cls(log_size, tuple(sorted({r.rule for r in kept})), groups)

    def stats(
        self, group_by: str, floor: int, limit: int | None = None, after: str | None = None
    ) -> OutcomeStats:
        """The verified share per group (rows without the grouping field are in no group), groups sorted
        by name: at most ``limit`` of them (every one if None) after the name ``after``, with the last
        one's name as ``next`` when more follow."""
        field = check_group_by(group_by)
        check_floor(floor)
        if limit is not None and not 1 <= limit <= MAX_GROUPS:
            raise InvalidInput(f"limit must be 1..{MAX_GROUPS}")
        groups = self.groups[field]
        names = self._names(field)
        start = 0 if after is None else bisect.bisect_right(names, after)
        end = len(names) if limit is None else min(len(names), start + limit)
        return OutcomeStats(
            group_by=field,
            floor=floor,
            verified_rung=VERIFIED_RUNG,
            rules=list(self.rules),
            log_size=self.log_size,
            groups=[Group(group=g, stats=groups[g].distribution(floor)) for g in names[start:end]],
            next=names[end - 1] if end < len(names) else None,
        )

    def _names(self, field: str) -> list[str]:
        """The groups' names of ``field``, sorted (the groups are kept in name order)."""
        names = self._sorted.get(field)
        if names is None:
            names = self._sorted[field] = list(self.groups[field])
        return names


def outcome_stats(rows: Iterable[LadderRow], group_by: str, floor: int, log_size: int) -> OutcomeStats:
    """The verified share per group of the standing rows (rows without the grouping field are in no
    group), groups sorted by name."""
    check_group_by(group_by)
    check_floor(floor)
    return Tally.of(rows, log_size).stats(group_by, floor)


def by_dimension(rows: Iterable[LadderRow]) -> dict[str, Distribution]:
    """Per dimension, the rung distribution and verified share of an agent's standing evidence rows
    (rows that carry scoring evidence), with n; no floor (it is one agent's own evidence)."""
    dims: dict[str, list[LadderRow]] = {}
    for r in strongest(x for x in rows if x.seq is not None):
        dims.setdefault(r.dimension, []).append(r)
    return {d: distribution(dims[d], 0) for d in sorted(dims)}
