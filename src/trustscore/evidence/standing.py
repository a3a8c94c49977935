"""Reporter standing: what fresh keys can say about an agent, together (policy ``standing-v3``).

Applied when the log is derived into evidence, before any model scores, so every served model (and the
offline ``trustscore score`` of an export) sees the same, already bounded evidence. docs/methodology.md,
"Reporter standing", states the policy and the bound it gives; in short:

* A reporter **has standing** for a statement logged at index ``i`` when, from the log alone, either it is
  a marketplace the operator approved (``marketplace-approval/v1``) and has not retired before ``i``, or
  the newest rating snapshot of :data:`REPORTER_MODEL` before ``i`` rates it at least
  :data:`MIN_RATING` and the first snapshot that rated it at least :data:`MIN_RATING` was taken at least
  :data:`MIN_RATED_DAYS` days before that one (a key rated low long ago and lifted on the day is a
  sleeper, not a reporter with a track record), **and** a marketplace approved then reported a success
  about it before ``i`` and is still approved at ``i`` (it is *vouched*: exams alone cannot buy
  standing, because fresh sittings are passed by a rule-based program that reads the public generators'
  templates; docs/methodology.md, "Known attacks"; since standing-v2 a rated reporter does not vouch,
  so it cannot hand standing on to keys of its own, a failed order does not vouch, and retiring a
  marketplace takes back the vouches it gave).
* Evidence from the server itself (graded exams, re-verification) and from reporters with standing is
  **standing evidence**. Everything else (settlements of reporters without standing, events of
  marketplaces the operator has not approved, and every self-attested work record, whoever signed it:
  an agent's own word about itself never has standing) goes to one **pool** per subject and dimension,
  shared by all such reporters together, with issuer :data:`POOL_ISSUER` (the reporter stays in the
  item's key).
* The pool's items together weigh at most :data:`POOL_SHARE` of the standing evidence about the same
  subject in the same dimension (counted with the smallest source weight any published model gives,
  the pool's with the largest), both undecayed and decayed with the shortest published half-life to the
  newest standing item. A pool item is dated no later than that newest standing item (it can neither
  refresh freshness nor escape decay), is scaled down to the room left, and is dropped when none is
  left — so with no standing evidence in a dimension, the pool adds nothing there at all.
* An agent's **sittings** (the server's grades of the exams it chose to sit, as often as it likes) are
  standing evidence, **spaced** per dimension since standing-v3 (:meth:`Standing.sitting_weight`):
  together, decayed with :data:`HALF_LIFE_DAYS`, they weigh at most as many fresh sittings as the agent
  may hold open at once, so a burst of sittings cannot drown what counterparties reported (under
  standing-v2 each sitting added a whole sitting's weight: a rule-based program's 5 sittings took a
  delivery that approved marketplaces had reported failed 20 times from 0 to 84).

Pure and deterministic: the result depends only on the statements fed, in log order.
"""

from __future__ import annotations

import bisect
import datetime as dt
from dataclasses import dataclass, field
from typing import Literal

import msgspec
import numpy as np

from trustscore.kinds.approvals import MarketplaceApproval
from trustscore.kinds.snapshots import RatingSnapshot
from trustscore.ledger.statements import ParsedStatement, parse_time
from trustscore.scoring.anchored import exp2
from trustscore.scoring.inputs import EvidenceItem
from trustscore.scoring.times import to_micros

#: The policy's version, named in every rating response and evidence export. standing-v2 (2026-12-07) is
#: standing-v1 with self-attested work records always pooled (under v1 an agent with standing counted its
#: own claims about itself in full, without bound) and vouches by approved marketplaces only (under v1 a
#: reporter with standing vouched, so it could hand standing on to a key of its own). The two derive the
#: same evidence from a log where neither happened.
#: standing-v3 (2026-12-07) is standing-v2 with an agent's sittings in one dimension spaced
#: (:meth:`Standing.sitting_weight`: under v2 every sitting added a full sitting's weight, so a program
#: sitting an exam again and again drowned the failures approved marketplaces had reported). The two
#: derive the same evidence from a log where no agent sat twice in a dimension. A server holding evidence
#: an earlier version derived derives it again at start-up (services/projector.py ``rederive``).
#: standing-v4 (2026-12-07) is standing-v3 with a re-verification run's fresh instances spaced the same way
#: on a track of their own (:meth:`Standing.fresh_weight`: under v3 every run's fresh items counted in
#: full, and each report, a free variant included, brings a run). The two derive the same evidence from a
#: log where no agent had two runs with fresh items in a dimension.
#: standing-v5 (2026-12-08) is standing-v4 with a re-verification run's answers to items of the private
#: sets spaced on the same track as its fresh items, counting only the agent's first answer to an item and
#: at most one later, lower one (:meth:`Standing.private_answer`), a private gap's failure kept when a
#: later run finds none (:meth:`Standing.gap`), and a failed security probe counted in every run (under
#: v4 the log's per-item grades let an endpoint learn the fixed private items and a newer answer replaced
#: the older at full weight: capability 0 -> 100; and a failed probe was held back while a passing run
#: reset the streak). The two derive the same evidence from a log without re-verification runs that asked
#: private items.
POLICY_VERSION = "standing-v5"
#: The pool's items weigh together at most this share of a dimension's standing evidence.
POOL_SHARE = 0.04
#: A reporter needs at least this rating (0..1000, adjusted, else total) ...
MIN_RATING = 500
#: ... and to have first reached it at least this many days before (by the server's snapshot times).
MIN_RATED_DAYS = 30
#: Reporter standing follows the rating snapshots of this model.
REPORTER_MODEL = "trustscore-v2"
#: The issuer of every pooled item: the pool's name since standing-v1, kept by later versions (items
#: already derived carry it, and a replay tells pooled items by it).
POOL_ISSUER = "pool:standing-v1"
#: The shortest per-item half-life of a published model (trustscore-v1/v2): the pool's decayed budget.
HALF_LIFE_DAYS = 30.0
#: Source weights counting standing evidence: the smallest any published model gives the source.
STANDING_SOURCE_WEIGHT = {"real-benchmark": 0.1, "verified": 0.9, "real": 1.0, "real-confidential": 0.5}
STANDING_OTHER = 0.1
#: Source weights counting pooled evidence: the largest any published model gives the source.
POOL_SOURCE_WEIGHT = {"real": 1.0, "real-confidential": 0.5}
POOL_OTHER = 1.0

_DAY_US = 86_400_000_000
_EPS = 1e-12
#: Beyond this many half-lives 2^-x is below float64's last bit of 1: a sitting weighs 1.
_SPACING_CAP = 64.0


class PolicyDescription(msgspec.Struct, frozen=True, kw_only=True):
    """What the API and the export say about the policy (all of its parameters)."""

    version: str = POLICY_VERSION
    pool_share: float = POOL_SHARE
    min_rating: int = MIN_RATING
    min_rated_days: int = MIN_RATED_DAYS
    reporter_model: str = REPORTER_MODEL
    pool_issuer: str = POOL_ISSUER
    half_life_days: float = HALF_LIFE_DAYS


class _Rated:
    """One reporter's ratings in snapshots of :data:`REPORTER_MODEL`, in log order."""

    __slots__ = ("first_rated_us", "indexes", "ratings", "times")

    def __init__(self) -> None:
        self.indexes: list[int] = []
        self.ratings: list[int | None] = []
        self.times: list[int] = []
        self.first_rated_us: list[int | None] = []  # taken_at of the first rating >= MIN_RATING up to here


@dataclass
class _Dimension:
    """Standing evidence (by key) and the pool's use of one subject's dimension."""

    standing: dict[str, tuple[float, int]] = field(default_factory=dict)  # key -> (weight, at µs)
    pool_raw: float = 0.0
    pool_ref: float = 0.0  # the pool's decayed weight at ``pool_ref_us``
    pool_ref_us: int = 0
    cached: tuple[float, float, int] | None = None  # totals() until the standing items change

    def set(self, key: str, unit: float, at_us: int) -> None:
        self.standing[key] = (unit, at_us)
        self.cached = None

    def drop(self, key: str) -> None:
        self.standing.pop(key, None)
        self.cached = None

    def totals(self) -> tuple[float, float, int]:
        """(undecayed weight, weight decayed to the newest item, the newest item's time); sums in
        ascending order of their terms, so the result depends only on the set of items. Cached: the pool
        asks for it once per pooled item, the standing items change less often."""
        if self.cached is None:
            if not self.standing:
                self.cached = (0.0, 0.0, 0)
            else:
                newest = max(at for _, at in self.standing.values())
                raw = sum(sorted(w for w, _ in self.standing.values()))
                ref = sum(sorted(w * _decay(newest - at) for w, at in self.standing.values()))
                self.cached = (raw, ref, newest)
        return self.cached


@dataclass
class _Sittings:
    """One spacing track of an agent in one dimension, in log order: its sitting closes (standing-v3) or
    its re-verification runs with fresh items (standing-v4)."""

    indexes: list[int] = field(default_factory=list)  # close indexes, ascending
    newest: list[int] = field(default_factory=list)  # the newest closed_at (µs) up to each close
    last_weight: float = 0.0  # the weight of the last close


#: The dimensions in which a success an approved marketplace reports vouches for its subject.
VOUCHING = ("delivery", "reliability")


def vouches(item: EvidenceItem) -> bool:
    """Whether ``item``, reported by an approved marketplace, vouches for its subject: a delivery or a
    payment made (an event ``delivered``, a settlement's delivery or payment ``pass``, a confirmed work
    record ``done``). An economic ``confirmed`` alone does not (an integration may send it when an order
    is placed, before anything is delivered or paid), nor any failure."""
    return item.dimension in VOUCHING and item.result == "success"


def _decay(age_us: int) -> float:
    return float(0.5 ** (age_us / (HALF_LIFE_DAYS * _DAY_US)))


def _spaced(track: _Sittings, index: int, opened: int, at: dt.datetime) -> float:
    """``1 − 2^(−Δ/h)`` for the entry logged at ``index`` on ``track`` (:meth:`Standing.sitting_weight`),
    Δ from the newest time of the entries below ``opened`` on it; recorded on it. The same for every item
    of one entry."""
    if track.indexes and track.indexes[-1] == index:
        return track.last_weight
    at_us = to_micros(at)
    position = bisect.bisect_left(track.indexes, opened)
    if position == 0:
        weight = 1.0
    else:
        x = min(_SPACING_CAP, (max(0, at_us - track.newest[position - 1]) / _DAY_US) / HALF_LIFE_DAYS)
        weight = float(1.0 - exp2(np.array([-x]))[0])
    track.indexes.append(index)
    track.newest.append(max(at_us, track.newest[-1]) if track.newest else at_us)
    track.last_weight = weight
    return weight


class Standing:
    """The policy's state over a log prefix, fed in log order (rebuildable from the log)."""

    def __init__(self) -> None:
        self._rated: dict[str, _Rated] = {}
        self._approved: dict[str, list[tuple[int, bool]]] = {}  # marketplace -> [(index, approved)]
        self._dims: dict[tuple[str, str], _Dimension] = {}
        self._key_dim: dict[tuple[str, str], str] = {}  # (agent, key) -> dimension holding it
        # agent -> {approved marketplace: index of its first success reported about the agent}
        self._vouched: dict[str, dict[str, int]] = {}
        self._sat: dict[tuple[str, str], _Sittings] = {}  # (agent, dimension) -> its sitting closes
        self._fresh: dict[tuple[str, str], _Sittings] = {}  # (agent, dimension) -> its runs' asked items
        # (agent, private item key) -> (the value of the agent's first answer, whether a lower one counted)
        self._answers: dict[tuple[str, str], tuple[float, bool]] = {}
        self._gapped: set[tuple[str, str]] = set()  # (agent, private-gap key) with a failure derived

    # --- what the log says about reporters ---------------------------------------------------------

    def feed(self, index: int, statement: ParsedStatement) -> None:
        """Feed an admitted statement logged at ``index`` (snapshots and approvals; others are ignored)."""
        p = statement.predicate
        if isinstance(p, RatingSnapshot):
            self.add_snapshot(index, p)
        elif isinstance(p, MarketplaceApproval):
            self.add_approval(index, p)

    def add_snapshot(self, index: int, snapshot: RatingSnapshot) -> None:
        if snapshot.model_version != REPORTER_MODEL:
            return
        taken = to_micros(parse_time(snapshot.taken_at, what="taken_at"))
        for row in snapshot.ratings:
            rated = self._rated.setdefault(row.agent, _Rated())
            rating = row.adjusted if row.adjusted is not None else row.total
            first = rated.first_rated_us[-1] if rated.first_rated_us else None
            if first is None and rating is not None and rating >= MIN_RATING:
                first = taken
            rated.indexes.append(index)
            rated.ratings.append(rating)
            rated.times.append(taken)
            rated.first_rated_us.append(first)

    def add_approval(self, index: int, approval: MarketplaceApproval) -> None:
        self._approved.setdefault(approval.marketplace, []).append((index, approval.action == "approve"))

    def approved(self, marketplace: str, before_index: int) -> bool:
        """Whether the operator's latest word on ``marketplace`` before ``before_index`` approves it."""
        history = self._approved.get(marketplace, [])
        position = bisect.bisect_left(history, (before_index, False))
        return position > 0 and history[position - 1][1]

    def vouch(self, agent: str, index: int, marketplace: str) -> None:
        """``marketplace``, approved, reported a success about ``agent`` in the statement logged at
        ``index`` (its first is kept)."""
        self._vouched.setdefault(agent, {}).setdefault(marketplace, index)

    def vouched_at(self, agent: str) -> int | None:
        """The index of the first success reported about ``agent`` by an approved marketplace, if any."""
        return min(self._vouched.get(agent, {}).values(), default=None)

    def vouched_before(self, agent: str, before_index: int) -> bool:
        """Whether a marketplace approved before ``before_index`` (still) had reported a success about
        ``agent`` before it: a vouch lapses while its marketplace is retired."""
        return any(
            at < before_index and self.approved(marketplace, before_index)
            for marketplace, at in self._vouched.get(agent, {}).items()
        )

    def has_standing(self, reporter: str, before_index: int) -> bool:
        """An approved marketplace, or a vouched, well-rated reporter (see the module docstring)."""
        if self.approved(reporter, before_index):
            return True
        if not self.vouched_before(reporter, before_index):
            return False
        rated = self._rated.get(reporter)
        if rated is None:
            return False
        position = bisect.bisect_left(rated.indexes, before_index)
        if position == 0:
            return False
        rating, first = rated.ratings[position - 1], rated.first_rated_us[position - 1]
        if rating is None or rating < MIN_RATING or first is None:
            return False
        return rated.times[position - 1] - first >= MIN_RATED_DAYS * _DAY_US

    # --- evidence ------------------------------------------------------------------------------------

    def sitting_weight(self, agent: str, dimension: str, index: int, opened: int, at: dt.datetime) -> float:
        """The extra weight of the items in ``dimension`` of ``agent``'s sitting opened at log index
        ``opened`` and closed at ``at`` (the close logged at ``index``), fed in log order; the same for
        every item of one close.

        ``1 − 2^(−Δ/h)``, h :data:`HALF_LIFE_DAYS`, Δ the time from the newest ``closed_at`` of the
        agent's sittings with items in the dimension that had *closed before this one was opened* (their
        close index below ``opened``) to ``at``; 1 when there is none, 0 (its items are dropped) when Δ is
        not positive. Each sitting takes the room the earlier ones' decay left, so sitting again at once
        adds next to nothing; and sittings open at the same time all see the same earlier closes, so the
        order the agent closes them in (having read every one's prompts) does not choose which counts.
        Pure IEEE arithmetic and :func:`~trustscore.scoring.anchored.exp2`: the same bits on every machine.
        """
        return _spaced(self._sat.setdefault((agent, dimension), _Sittings()), index, opened, at)

    def fresh_weight(self, agent: str, dimension: str, index: int, at: dt.datetime) -> float:
        """The extra weight of the fresh items in ``dimension`` of a re-verification run of ``agent``
        logged at ``index`` that ran at ``at`` (standing-v4): as :meth:`sitting_weight`, on a track of its
        own, every run logged before it counting (its items are made when it runs). Each accepted report
        brings a run with fresh items, and report variants cost nothing: unspaced, runs a minute apart
        drowned what approved marketplaces had reported (found by an adversarial audit, 2026-12-07)."""
        return _spaced(self._fresh.setdefault((agent, dimension), _Sittings()), index, index, at)

    def private_answer(self, agent: str, key: str, value: float | None) -> Literal["first", "lower"] | None:
        """Whether a re-verification run's answer ``value`` to the private item keyed ``key`` counts
        (standing-v5): the agent's ``first`` answer to it, or the first later one ``lower`` than that;
        otherwise None. The log publishes every private item's grade and the sets are fixed, so a later
        better answer may come from memory; a later worse one is news (a regression)."""
        seen = self._answers.get((agent, key))
        if seen is None:
            return "first"
        first, lowered = seen
        return "lower" if (value or 0.0) < first and not lowered else None

    def answered(self, agent: str, key: str, value: float | None, which: Literal["first", "lower"]) -> None:
        """Record that the answer :meth:`private_answer` called ``which`` was derived (a value of None,
        which a re-verification item never has, reads as 0)."""
        if which == "first":
            self._answers[(agent, key)] = (value or 0.0, False)
        else:
            self._answers[(agent, key)] = (self._answers[(agent, key)][0], True)

    def gap(self, agent: str, key: str, failed: bool) -> bool:
        """Whether a re-verification run's private-gap judgement keyed ``key`` counts (standing-v5): a
        failure always (and is recorded), a success only while no failure was (a gap closed later may be
        closed by answers learnt from the grades the log publishes)."""
        if failed:
            self._gapped.add((agent, key))
            return True
        return (agent, key) not in self._gapped

    def observe(
        self, agent: str, dimension: str, key: str | None, source: str, weight: float, at: dt.datetime
    ) -> None:
        """Count a standing item (``weight`` = its extra weight)."""
        if key is None:
            key = f"\x00unkeyed:{len(self._key_dim)}"
        moved_from = self._key_dim.get((agent, key))
        if moved_from is not None and moved_from != dimension:
            self._dims[(agent, moved_from)].drop(key)
        self._key_dim[(agent, key)] = dimension
        unit = STANDING_SOURCE_WEIGHT.get(source, STANDING_OTHER) * weight
        self._dims.setdefault((agent, dimension), _Dimension()).set(key, unit, to_micros(at))

    def pool(
        self, agent: str, dimension: str, source: str, weight: float, at: dt.datetime
    ) -> tuple[float, dt.datetime] | None:
        """The (extra weight, time) a pooled item gets, or None when the pool has no room left."""
        dim = self._dims.get((agent, dimension))
        if dim is None or weight <= 0:
            return None
        raw, ref, newest = dim.totals()
        if raw <= 0:
            return None
        at_us = min(to_micros(at), newest)
        factor = _decay(newest - at_us)
        pool_ref = (
            dim.pool_ref * _decay(newest - dim.pool_ref_us) if dim.pool_ref_us <= newest else dim.pool_ref
        )
        source_weight = POOL_SOURCE_WEIGHT.get(source, POOL_OTHER)
        room = min(POOL_SHARE * raw - dim.pool_raw, (POOL_SHARE * ref - pool_ref) / factor)
        unit = source_weight * weight
        if room <= _EPS * max(1.0, raw):
            return None
        extra = weight * min(1.0, room / unit)
        self._count(dim, source_weight * extra, factor, pool_ref, newest)
        return extra, at if to_micros(at) == at_us else _from_micros(at_us)

    def count_pooled(
        self, agent: str, dimension: str, source: str, extra_weight: float, at: dt.datetime
    ) -> None:
        """Replay a pooled item derived before (rebuilding the state from stored evidence)."""
        dim = self._dims.setdefault((agent, dimension), _Dimension())
        _, _, newest = dim.totals()
        factor = _decay(newest - to_micros(at))
        pool_ref = (
            dim.pool_ref * _decay(newest - dim.pool_ref_us) if dim.pool_ref_us <= newest else dim.pool_ref
        )
        self._count(dim, POOL_SOURCE_WEIGHT.get(source, POOL_OTHER) * extra_weight, factor, pool_ref, newest)

    @staticmethod
    def _count(dim: _Dimension, used: float, factor: float, pool_ref: float, newest: int) -> None:
        dim.pool_raw += used
        dim.pool_ref = pool_ref + used * factor
        dim.pool_ref_us = newest


def _from_micros(us: int) -> dt.datetime:
    return dt.datetime(1970, 1, 1, tzinfo=dt.UTC) + dt.timedelta(microseconds=us)
