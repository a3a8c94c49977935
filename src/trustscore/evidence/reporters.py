"""Counterparty weighting: a reporter's settlements count in proportion to its own rating.

``weight = 0.5 + 0.5 * rating / 1000`` with ``rating`` the reporter's ``adjusted`` total (or ``total``
when that is null) in the newest rating-snapshot row for the reporter logged *before* the report; 0.5
when there is none yet. Only the log decides it, so anyone replaying the log gets the same weights.
"""

from __future__ import annotations

import bisect

from trustscore.errors import InvalidInput
from trustscore.evidence.standing import REPORTER_MODEL as STANDING_REPORTER_MODEL
from trustscore.kinds.snapshots import MAX_TOTAL, RatingSnapshot
from trustscore.ledger.statements import ParsedStatement

#: The weight of a reporter with no rating yet (and the floor of every weight).
UNRATED_WEIGHT = 0.5
#: Reporter weights follow this model's rating snapshots only (one calibration decides): the one the
#: reporter-standing policy reads.
REPORTER_MODEL = STANDING_REPORTER_MODEL


def rating_weight(rating: int | None) -> float:
    """The extra weight of a reporter whose rating (0..1000) is ``rating``; 0.5 for none."""
    if rating is None:
        return UNRATED_WEIGHT
    return (MAX_TOTAL + min(max(rating, 0), MAX_TOTAL)) / (2 * MAX_TOTAL)


def no_snapshots(_reporter: str, _before_index: int) -> float:
    """The reporter weight when no snapshot is known: every reporter is unrated."""
    return UNRATED_WEIGHT


class ReporterWeights:
    """Reporter weights built by feeding snapshot statements in log order.

    Feed only snapshots signed by a trusted snapshot key (the service's configuration decides which).
    Queries are pure: ``weight(r, i)`` depends only on the snapshots fed with an index below ``i``, so
    feeding later snapshots never changes an earlier answer.
    """

    def __init__(self) -> None:
        self._indexes: dict[str, list[int]] = {}
        self._ratings: dict[str, list[int | None]] = {}
        self._last = -1

    def add(self, index: int, snapshot: RatingSnapshot) -> None:
        """Record the snapshot logged at ``index`` if it is of :data:`REPORTER_MODEL`; indexes must
        strictly increase."""
        if snapshot.model_version != REPORTER_MODEL:
            return
        if index <= self._last:
            raise InvalidInput(f"snapshots must be fed in log order: {index} after {self._last}")
        self._last = index
        for row in snapshot.ratings:
            rating = row.adjusted if row.adjusted is not None else row.total
            self._indexes.setdefault(row.agent, []).append(index)
            self._ratings.setdefault(row.agent, []).append(rating)

    def feed(self, index: int, statement: ParsedStatement) -> None:
        """:meth:`add` if ``statement`` is a rating snapshot; other kinds are ignored."""
        if isinstance(statement.predicate, RatingSnapshot):
            self.add(index, statement.predicate)

    def rating(self, reporter: str, before_index: int) -> int | None:
        """The reporter's newest rating logged before ``before_index``, or None."""
        indexes = self._indexes.get(reporter)
        if not indexes:
            return None
        position = bisect.bisect_left(indexes, before_index)
        return None if position == 0 else self._ratings[reporter][position - 1]

    def weight(self, reporter: str, before_index: int) -> float:
        return rating_weight(self.rating(reporter, before_index))
