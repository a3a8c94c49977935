"""What the people-facing pages and the badge read: the same services as the JSON API, gathered per page.

Nothing here renders HTML; it collects what a page shows (ratings, names, history, decoded log entries)
and keeps the one cache the hot badge route needs.
"""

from __future__ import annotations

import base64
import hashlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

import msgspec

from trustscore.errors import InvalidInput, NotFound, TrustscoreError
from trustscore.kinds.graded import DIMENSIONS
from trustscore.ledger import audit, keys
from trustscore.names import NameIndex
from trustscore.pages import badge as badges
from trustscore.services.kept import KeptBodies, Stamp
from trustscore.services.log import LogService
from trustscore.services.public import PublicService
from trustscore.services.ratings import RatedAgent
from trustscore.services.single_flight import SingleFlight
from trustscore.store.history import HistoryStore, SnapshotPoint
from trustscore.store.log import ListedEntry, StoredCheckpoint

MAX_HISTORY = 1000  # snapshots per history page (API) and in the chart (the newest ones)
MAX_SEARCH = 50  # agents a search lists
RECENT_ENTRIES = 25  # entries on /log
MAX_CACHED_PAGES = 4096  # rendered profile pages kept (the oldest is dropped first)
MAX_KEPT_BADGES = 100_000  # badge SVGs kept (about 1 KB each)


@dataclass(frozen=True)
class History:
    agent: str
    model_version: str
    points: list[SnapshotPoint]
    next: int | None  # the ``from`` of the next page; None on the last


@dataclass(frozen=True)
class Badge:
    svg: bytes
    etag: str


@dataclass(frozen=True)
class DecodedEntry:
    """One log entry as a page shows it: kind, signer, subject and the statement's JSON."""

    index: int
    leaf: bytes
    leaf_hash: bytes
    kind: str
    signer: str
    subject: str
    statement: str  # the payload, pretty-printed JSON (or the reason it could not be decoded)


def decode_entry(index: int, leaf: bytes, leaf_hash: bytes) -> DecodedEntry:
    """``leaf`` decoded for display; an entry that does not parse is shown as such, not hidden."""
    try:
        prepared = audit.parse_leaf(leaf)
    except TrustscoreError as exc:
        return DecodedEntry(index, leaf, leaf_hash, "unparsed", "", "", str(exc))
    facts = prepared.statement.facts
    pretty = msgspec.json.format(prepared.payload, indent=2).decode("utf-8", "replace")
    return DecodedEntry(
        index, leaf, leaf_hash, prepared.statement.kind.predicate_type, facts.signer, facts.subject, pretty
    )


def _with_etag(svg: bytes) -> Badge:
    return Badge(svg, '"' + hashlib.sha256(svg).hexdigest()[:32] + '"')


class RenderedPages(KeptBodies[tuple[str, ...], bytes]):
    """Rendered profile pages (at most :data:`MAX_CACHED_PAGES`), kept as :class:`KeptBodies` keeps."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__(MAX_CACHED_PAGES, clock)

    async def page(self, key: tuple[str, ...], stamp: Stamp, make: Callable[[], Awaitable[bytes]]) -> bytes:
        return await self.get(key, stamp, make)


class PageService:
    def __init__(
        self, public: PublicService, log: LogService, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.public = public
        self.log = log
        self.history_store = HistoryStore(public.store.pool)
        # (model, agent, dimension) -> the badge's SVG, kept with the rating it was drawn from
        self._badges = KeptBodies[tuple[str, str, str | None], Badge](MAX_KEPT_BADGES, clock)
        self.rendered = RenderedPages(clock)
        # (model, dimension) -> the /leaderboard page's (stamp, when rendered, body), and its rendering
        # under way with its stamp (board_page()).
        self.boards: dict[tuple[str, str | None], tuple[object, float, bytes]] = {}
        self._rendering = SingleFlight[tuple[str, str | None], bytes]()

    # --- rendered pages ---------------------------------------------------------------------------

    def stamp(self, agent: str, model: str | None) -> Stamp | None:
        """What a profile page of ``agent`` depends on: its rating object (new with every piece of
        evidence, snapshot, re-verification or refresh), the projected log size and the checkpoint size
        (new with any entry, a card update included). None for an agent without a rating yet."""
        stored = self.public.ratings.stored(agent, model)
        if stored is None:
            return None
        return (stored.rating, self.public.ratings.size, self.log.checkpoint_size)

    async def page(self, key: tuple[str, ...], stamp: Stamp, make: Callable[[], Awaitable[bytes]]) -> bytes:
        """The profile page ``key`` as rendered at ``stamp`` (see :class:`RenderedPages`)."""
        return await self.rendered.page(key, stamp, make)

    async def board_page(
        self, key: tuple[str, str | None], stamp: object, age: float, render: Callable[[], Awaitable[bytes]]
    ) -> bytes:
        """The ``/leaderboard`` page ``key`` as rendered at ``stamp``: the kept one while its stamp holds,
        for at most ``age`` seconds (a scope status can change with the time alone), else rendered by
        ``render``, once for the readers arriving together (one that goes away leaves it running)."""
        kept = self.boards.get(key)
        if kept is not None and kept[0] == stamp and time.monotonic() - kept[1] < age:
            return kept[2]
        return await self._rendering.get(key, lambda: self._render_board(key, stamp, render), stamp)

    async def _render_board(
        self, key: tuple[str, str | None], stamp: object, render: Callable[[], Awaitable[bytes]]
    ) -> bytes:
        body = await render()
        if self._rendering.under_way(key, stamp):  # no newer rendering started meanwhile
            self.boards[key] = (stamp, time.monotonic(), body)
        return body

    # --- names ------------------------------------------------------------------------------------

    async def directory(self) -> NameIndex:
        """Every registered agent's id and name (the public service's directory, brought up to date).
        A page reads it once and hands it to ``DisplayNames``, :meth:`search` and the leaderboard: each
        read is a transaction of several round trips even when nothing changed."""
        return await self.public.directory.read()

    async def search(self, query: str, agents: NameIndex) -> list[tuple[str, str]]:
        """The agent search's first :data:`MAX_SEARCH` agents of ``agents`` (the directory just read) for
        ``query`` (services/agent_search.py: names compared as look-alike skeletons, ids by prefix; exact
        matches first), as (id, name)."""
        return [(f.id, f.name) for f in await self.public.search.search(query, MAX_SEARCH, agents)]

    # --- history ----------------------------------------------------------------------------------

    async def history(
        self, agent: str, model: str | None, start: int, end: int, limit: int, *, newest: bool = False
    ) -> History:
        """``agent``'s logged snapshots of ``model`` at log indexes ``[start, end)``, oldest first, at
        most ``limit``: the first ones (paged on with ``next``) or, with ``newest``, the last ones."""
        if not 1 <= limit <= MAX_HISTORY:
            raise InvalidInput(f"limit must be 1..{MAX_HISTORY}")
        if start > end:
            raise InvalidInput("need from <= to")
        weights = self.public.ratings.model(model)
        await self.public.card(agent)
        points = await self.history_store.snapshots_of(
            agent, weights.model_version, start, end, limit, newest=newest
        )
        full = len(points) == limit and not newest
        return History(agent, weights.model_version, points, points[-1].index + 1 if full else None)

    # --- badge ------------------------------------------------------------------------------------

    async def badge(self, agent: str, model: str | None, dimension: str | None) -> Badge:
        """The badge of ``agent``: its total and grade, or one dimension, with the verified mark. An
        agent without a card (or a service key) gets the grey ``unknown`` badge, never an error."""
        if not keys.is_key_id(agent):
            raise InvalidInput("not an agent id (ts1_ and 40 hex digits)")
        if dimension is not None and dimension not in DIMENSIONS:
            raise InvalidInput(f"unknown dimension {dimension!r}; one of {', '.join(DIMENSIONS)}")
        weights = self.public.ratings.model(model)
        stored = self.public.ratings.stored(agent, weights.model_version)
        key = (weights.model_version, agent, dimension)

        async def make() -> Badge:
            try:
                rated = await self.public.rating(agent, weights.model_version)
            except NotFound:
                return _with_etag(badges.render(badges.unknown(dimension)).encode())
            return _with_etag(badges.render(await self._badge_text(rated, dimension)).encode())

        if stored is None:
            return await make()
        # Every re-verification brings the agent evidence, so a new status comes with a new rating object
        # (and a new projected size): the badge drawn from this one stays right while it is current.
        return await self._badges.get(key, (stored.rating, self.public.ratings.size, None), make)

    async def _badge_text(self, rated: RatedAgent, dimension: str | None) -> badges.BadgeText:
        verified = (await self.public.verification(rated.rating.agent)).verified
        r = rated.rating
        if dimension is None:
            return badges.for_total(
                r.total, r.grade, verified, self.public.ratings.model(r.model_version).spec.total.scale * 100
            )
        held = None if rated.medals is None else rated.medals.dimensions.get(dimension)
        medal = None if held is None else held.medal
        return badges.for_dimension(dimension, r.dimensions.get(dimension), verified, medal)

    # --- log --------------------------------------------------------------------------------------

    async def checkpoint(self) -> StoredCheckpoint | None:
        """The latest checkpoint, or None before the first is signed."""
        try:
            return await self.log.latest_checkpoint()
        except TrustscoreError:
            return None

    async def recent_entries(self, size: int, count: int = RECENT_ENTRIES) -> list[ListedEntry]:
        """The last ``count`` entries below ``size``, newest first, by kind, signer and subject: their leaves
        are not read (before 2026-12-07 each was read, parsed and its payload pretty-printed for a list that
        shows none of it: 1.2 s for 25 large reports)."""
        if size <= 0:
            return []
        return list(reversed(await self.log.listed(max(0, size - count), size)))

    async def entry(self, index: int) -> DecodedEntry:
        rows = await self.log.entries(index, index + 1, 1)
        if not rows:
            raise NotFound(f"no log entry {index} (yet)")
        return decode_entry(rows[0].index, rows[0].leaf, rows[0].leaf_hash)


def b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
