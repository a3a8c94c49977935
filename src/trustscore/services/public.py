"""Read side for the public: agents, ratings with their provenance, evidence, leaderboard, methodology."""

from __future__ import annotations

import asyncio
import bisect
import datetime as dt
import heapq
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass

import msgspec

from trustscore import resources
from trustscore.errors import InvalidInput, NotFound
from trustscore.exams.loader import ExamDirs, list_exams
from trustscore.exams.model import ExamSet
from trustscore.kinds.graded import DIMENSIONS
from trustscore.ladder.stats import Distribution
from trustscore.names import NameIndex
from trustscore.reverify.status import VerificationStatus, summarize
from trustscore.scope.report import ScopeSummary
from trustscore.services.agent_directory import AgentDirectory
from trustscore.services.agent_search import AgentSearch
from trustscore.services.kept import MAX_STALE, KeptBodies
from trustscore.services.log import LogService
from trustscore.services.ratings import DEFAULT_MODEL, DEFAULT_WEIGHTS_DIR, RatedAgent, RatingView
from trustscore.services.single_flight import SingleFlight
from trustscore.store.projection_tables import Card, EvidenceRow, ProjectionStore


async def _no_ladder(_agent: str, _log_size: int) -> dict[str, Distribution]:
    return {}


async def _no_scope(_agent: str) -> ScopeSummary | None:
    return None


async def _no_verifications(agents: Sequence[str]) -> dict[str, VerificationStatus]:
    """No re-verifier is running: nothing is verified, and no lapse is claimed."""
    now = dt.datetime.now(dt.UTC)
    return {agent: summarize([], endpoint="", now=now, interval_s=0) for agent in agents}


METHODOLOGY_DOC = resources.path("docs", "methodology.md")


@dataclass(frozen=True)
class Ranked:
    rank: int
    rated: RatedAgent
    score: float | None


@dataclass(frozen=True)
class Leaderboard:
    model: str
    dimension: str | None
    ranked: list[Ranked]
    unranked: list[tuple[RatedAgent, str]]
    # What the board was made at: the ratings' revision and log size, and how many agents are registered
    # (a page rendered from it may be kept while it holds).
    stamp: tuple[int, int, int] = (0, 0, 0)


MAX_KEPT_BODIES = 100_000  # encoded rating bodies kept (about 2.5 KB each)
BOARD_ROWS = 1000  # the most a leaderboard read asks for, of ranked and of unranked agents
BOARD_IN_LOOP = 4_000  # registered agents up to which a board is made on the event loop (~10 ms)
SCOPE_READS = 4  # scope summaries read at once by scope_summaries(), in the whole process

# A leaderboard's kept rows: (-score, agent, rating) ranked; (agent, reason, rating or None) unranked.
_Scored = tuple[float, str, RatedAgent]
_Unscored = tuple[str, str, RatedAgent | None]
_Stamp = tuple[int, int, int]  # the ratings' revision and log size, and how many agents are registered
_Board = tuple[_Stamp, list[_Scored], list[_Unscored]]


class PublicService:
    def __init__(
        self,
        log: LogService,
        store: ProjectionStore,
        ratings: RatingView,
        exam_dirs: ExamDirs,
        *,
        verifications: Callable[
            [Sequence[str]], Awaitable[dict[str, VerificationStatus]]
        ] = _no_verifications,
        ladder: Callable[[str, int], Awaitable[dict[str, Distribution]]] = _no_ladder,
        scope_summary: Callable[[str], Awaitable[ScopeSummary | None]] = _no_scope,
        primary: ProjectionStore | None = None,
    ) -> None:
        self.log = log
        self.store = store  # on the read database (a streaming replica, or the primary)
        # The primary's, when ``store`` is a replica's: asked for a card the replica has not replayed yet.
        self.primary = primary
        self.ratings = ratings
        self.exam_dirs = exam_dirs
        # Encoded rating bodies by (model, agent): reused while the rating object, the log size and the
        # checkpoint size stay the same (services/kept.py).
        self._bodies = KeptBodies[tuple[str, str], bytes](MAX_KEPT_BODIES)
        self._no_rating_period, self._no_rating_marker = -1, object()  # _no_rating()
        self.verifications = verifications  # agents' re-verification status (services/reverify.py)
        # Per dimension, the rung distribution of an agent's evidence (services/ladder.py).
        self.ladder = ladder
        self.scope_summary = scope_summary
        self._scope_reads = asyncio.Semaphore(SCOPE_READS)  # scope_summaries()
        self.directory = AgentDirectory(store)  # every registered agent's id and name
        self.search = AgentSearch(self.directory)  # the API's, the MCP/A2A tools' and the home page's
        # Leaderboards by (model, dimension) with the stamp they were made at (leaderboard()).
        self._boards: dict[tuple[str, str | None], _Board] = {}
        self._making = SingleFlight[tuple[str, str | None], _Board]()  # boards made in a thread
        # Per model, the ratings revision and a copy of its ratings then, read by the boards made in threads.
        self._held_copies: dict[str, tuple[int, Mapping[str, RatedAgent]]] = {}
        self.board_in_loop = BOARD_IN_LOOP

    async def verification(self, agent: str) -> VerificationStatus:
        return (await self.verifications([agent]))[agent]

    async def scope_summaries(self, agents: Sequence[str]) -> dict[str, ScopeSummary | None]:
        """:attr:`scope_summary` of each of ``agents``, their round trips overlapping: at most
        :data:`SCOPE_READS` at once in the whole process (a page of 200 rows, or several pages at once,
        never hold more of the pool's connections, which appends share)."""

        async def one(agent: str) -> ScopeSummary | None:
            async with self._scope_reads:
                return await self.scope_summary(agent)

        unique = list(dict.fromkeys(agents))
        tasks = [asyncio.ensure_future(one(agent)) for agent in unique]
        try:
            found = await asyncio.gather(*tasks)
        except BaseException:  # one failed (the others are stopped) or the caller was cancelled
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            raise
        return dict(zip(unique, found, strict=True))

    async def lookalikes(self, card: Card) -> list[str]:
        """Agents registered before ``card``'s whose display names look like its name (issue #10)."""
        return (await self.directory.read()).confusable_with(card.id, card.name)

    async def card(self, agent: str) -> Card:
        card = await self.store.card(agent)
        if card is None and self.primary is not None:
            card = await self.primary.card(agent)
        if card is None:
            raise NotFound(f"no card for {agent} (yet: cards appear once projected)")
        return card

    async def agents(self, after: str | None, limit: int) -> list[Card]:
        """The cards of registered agents after ``after`` in id order, at most ``limit``."""
        if not 1 <= limit <= 1000:
            raise InvalidInput("limit must be 1..1000")
        registered = await self._registered_agents()
        first = 0 if after is None else bisect.bisect_right(registered, after)
        ids = registered[first : first + limit]
        cards = await self.store.cards(ids)  # one query for the page, not one per agent
        return [cards[a] for a in ids if a in cards]

    async def rating(self, agent: str, model: str | None) -> RatedAgent:
        rated = self.ratings.rating(agent, model)
        if rated is not None:
            return rated
        card = await self.card(agent)
        if card.kind == "service":
            raise NotFound(f"{agent} is a service key, which is not rated")
        # A refresh may have brought the agent its first evidence while the card was read: its rating
        # then exists, and an all-null rating stamped with the new log size would be false for that size.
        rated = self.ratings.rating(agent, model)
        return rated if rated is not None else self.ratings.unrated(agent, model)

    async def rating_body(
        self,
        agent: str,
        model: str | None,
        encode: Callable[
            [RatedAgent, int | None, VerificationStatus, dict[str, Distribution], ScopeSummary | None], bytes
        ],
    ) -> bytes:
        """The encoded rating response of ``agent``, encoded again only when something it shows changed
        (every recorded re-verification brings the agent evidence, so it changes the rating object); after
        a decay refresh alone, the previous body for at most kept.MAX_STALE seconds (services/kept.py)."""
        size = self.log.checkpoint_size

        async def make() -> bytes:
            rated = await self.rating(agent, model)
            ladder = await self.ladder(agent, rated.log_size)
            return encode(
                rated, size, await self.verification(agent), ladder, await self.scope_summary(agent)
            )

        stored = self.ratings.stored(agent, model)
        # No rating computed: an agent with no evidence yet (its all-null body, kept like any other while
        # the log stays where it is: it was made again at every read, ~4 ms each), or an unknown key
        # (make() raises NotFound: nothing is kept). Its stamp's rating object changes every MAX_STALE
        # seconds, as a decay refresh changes a rated agent's, so a body with a status reached by time
        # alone is made again in the background even on a quiet log.
        rating: object = self._no_rating() if stored is None else stored.rating
        key = (self.ratings.model(model).model_version, agent)
        return await self._bodies.get(key, (rating, self.ratings.size, size), make)

    def _no_rating(self) -> object:
        """The stamp's rating object of an agent without a rating (services/kept.py compares it by
        identity): a new one every :data:`~trustscore.services.kept.MAX_STALE` seconds."""
        period = int(time.monotonic() // MAX_STALE)
        if period != self._no_rating_period:
            self._no_rating_period, self._no_rating_marker = period, object()
        return self._no_rating_marker

    async def evidence(self, agent: str, after: tuple[int, int], limit: int) -> tuple[int, list[EvidenceRow]]:
        """The log size the read database had projected, then ``agent``'s evidence after the cursor: every
        item from an entry below that size is on this page or a later one (read in that order, so a
        lagging replica says how far it got)."""
        if not 1 <= limit <= 1000:
            raise InvalidInput("limit must be 1..1000")
        await self.card(agent)
        size = await self.store.projected_size()
        return size, await self.store.evidence_of(agent, after, limit)

    def board_model(self, model: str | None, dimension: str | None) -> str:
        """The model version a board of ``model`` (None: the default) and ``dimension`` (None: the total)
        ranks by; raises InvalidInput or NotFound for a query no board answers (before anything is read)."""
        if dimension is not None and dimension not in DIMENSIONS:
            raise InvalidInput(f"unknown dimension {dimension!r}; one of {', '.join(DIMENSIONS)}")
        return self.ratings.model(model).model_version

    async def leaderboard(
        self, model: str | None, dimension: str | None, limit: int, directory: NameIndex | None = None
    ) -> Leaderboard:
        """Agents ranked by total (or one dimension). Registered agents without a score, including those
        with no evidence at all, are listed apart with the reason, never ranked. Parties are not ranked.

        The first :data:`BOARD_ROWS` of each list are kept per model and dimension with the stamp they were
        made at (the ratings' revision and log size, and how many agents are registered); a read at the
        same stamp costs O(``limit``), and only the agents shown are given an all-null rating. Making a
        board again is one pass over the registered agents, over the ratings of one step of the event
        loop with the stamp (:meth:`_made_board`), so every row holds for the log size the board names.
        A caller that has just read the directory (a page that also shows names) passes it, sparing a
        second read."""
        name = self.board_model(model, dimension)
        if not 1 <= limit <= BOARD_ROWS:
            raise InvalidInput(f"limit must be 1..{BOARD_ROWS}")
        registered = await self._registered_agents() if directory is None else directory.ids()
        stamp = (self.ratings.revision, self.ratings.size, len(registered))
        kept = self._boards.get((name, dimension))
        if kept is None or kept[0] != stamp:
            kept = await self._made_board(name, dimension, registered, stamp)
        (_, size, _), scored, unscored = kept  # every row holds for the log size the board was made at
        ranked = [
            Ranked(i + 1, msgspec.structs.replace(rated, log_size=size), -negated)
            for i, (negated, _, rated) in enumerate(scored[:limit])
        ]
        unranked = [
            (
                msgspec.structs.replace(
                    self.ratings.unrated(agent, name) if rated is None else rated, log_size=size
                ),
                reason,
            )
            for agent, reason, rated in unscored[:limit]
        ]
        return Leaderboard(name, dimension, ranked, unranked, kept[0])

    async def _made_board(
        self, model: str, dimension: str | None, registered: list[str], stamp: _Stamp
    ) -> _Board:
        """The board of ``model`` and ``dimension`` made again for ``stamp`` (the view now), kept.

        Up to :data:`BOARD_IN_LOOP` registered agents it is made here, in the step of the event loop that
        read the stamp. Beyond, from a copy of the ratings taken in that step, in a thread: the pass over
        the agents is Python (~2.5 us an agent: 250 ms at 10^5), and before 2026-12-07 it held the event
        loop for every board read after a rating moved. A read arriving while a board is being made waits
        for that one (made for a stamp a little older than its question, and saying so by the log size
        the answer names: ``log_size`` in the JSON, on the page)."""
        key = (model, dimension)
        if len(registered) <= self.board_in_loop:
            kept = self._boards[key] = (stamp, *self._board(self.ratings.held(model), dimension, registered))
            return kept
        return await self._making.get(
            key,
            lambda: self._board_in_thread(key, stamp, self._held_copy(model, stamp), dimension, registered),
        )

    def _held_copy(self, model: str, stamp: _Stamp) -> Mapping[str, RatedAgent]:
        """A copy of ``model``'s ratings as they are in this step (``stamp``'s), one shared by the boards
        of the model made for that stamp: a dict copy in C (~4 ms at 10^5 agents, 33 ms at 10^6; a copy
        through the read-only view took 40 ms and 558 ms, once per board)."""
        copied = self._held_copies.get(model)
        if copied is None or copied[0] != stamp[0]:
            copied = self._held_copies[model] = (stamp[0], self.ratings.held_copy(model))
        return copied[1]

    async def _board_in_thread(
        self,
        key: tuple[str, str | None],
        stamp: _Stamp,
        held: Mapping[str, RatedAgent],
        dimension: str | None,
        registered: list[str],
    ) -> _Board:
        scored, unscored = await asyncio.to_thread(self._board, held, dimension, registered)
        kept = self._boards.get(key)
        if kept is None or kept[0] < stamp:  # a board made in the loop meanwhile may be newer: served
            kept = self._boards[key] = (stamp, scored, unscored)
        self._held_copies.pop(key[0], None)  # not kept past the makings that read it
        return kept

    @staticmethod
    def _board(
        held: Mapping[str, RatedAgent], dimension: str | None, registered: list[str]
    ) -> tuple[list[_Scored], list[_Unscored]]:
        """The first :data:`BOARD_ROWS` ranked (highest first, then by id) and unranked (by id) agents of
        ``registered`` (sorted), by their ratings ``held``: one pass, never sorted whole."""
        scored: list[_Scored] = []
        unscored: list[_Unscored] = []
        for agent in registered:
            rated = held.get(agent)
            if rated is None:
                if len(unscored) < BOARD_ROWS:  # agents come in id order: the first are the ones kept
                    unscored.append((agent, "no_evidence", None))
                continue
            rating = rated.rating
            if dimension is None:
                value: float | None = None if rating.total is None else float(rating.total)
                reason = rating.null_reasons.get("total", "no_scored_dimensions")
            else:
                value = rating.dimensions.get(dimension)
                reason = rating.null_reasons.get(f"dimensions.{dimension}", "no_evidence")
            if value is None:
                if len(unscored) < BOARD_ROWS:
                    unscored.append((agent, reason, rated))
            else:
                scored.append((-value, agent, rated))
        # Agents are distinct, so no two tuples tie on (value, agent) and ratings are never compared.
        return heapq.nsmallest(BOARD_ROWS, scored), unscored

    async def _registered_agents(self) -> list[str]:
        """Every key registered as an agent, in id order (the directory's list: never changed once
        returned)."""
        return (await self.directory.read()).ids()

    def methodology(self) -> tuple[str, list[tuple[str, str, str, bool]]]:
        """The methodology document and each served model's (version, digest, weights file text, default)."""
        doc = METHODOLOGY_DOC.read_text(encoding="utf-8") if METHODOLOGY_DOC.exists() else ""
        models = [
            (
                name,
                w.digest,
                (DEFAULT_WEIGHTS_DIR / f"{name}.toml").read_text(encoding="utf-8"),
                name == DEFAULT_MODEL,
            )
            for name, w in sorted(self.ratings.models.items())
        ]
        return doc, models

    def exams(self) -> list[ExamSet]:
        return [e for e in list_exams(ExamDirs(self.exam_dirs.public, None)) if e.file.tier == "public"]
