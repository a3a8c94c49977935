"""The projector: tails the log, derives cards, evidence and snapshots, and refreshes ratings."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable

from trustscore.evidence.project_log import RECORDED, Projected, ProjectionState, project
from trustscore.kinds.approvals import MARKETPLACE_APPROVAL
from trustscore.kinds.snapshots import RATING_SNAPSHOT
from trustscore.ladder.rule import CURRENT_RULE
from trustscore.services.ratings import RatingService
from trustscore.store import projection_tables
from trustscore.store.ladder import LadderStore
from trustscore.store.log import LogStore
from trustscore.store.projection_tables import AfterStep, EvidenceRow, ProjectionStore

log = logging.getLogger(__name__)


class Projector:
    def __init__(
        self,
        log_store: LogStore,
        store: ProjectionStore,
        log_public_key: bytes,
        ratings: RatingService,
        *,
        batch: int = 5000,
        ladder_rule: str = CURRENT_RULE,
        ladder: LadderStore | None = None,
        after_step: AfterStep | None = None,
        rating_lag: float,  # settings.rating_lag: seconds ratings may trail the projection during ingest
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log_store = log_store
        self.store = store
        self.log_public_key = log_public_key
        self.ratings = ratings
        self.batch = batch
        self.ladder_rule = ladder_rule
        self.ladder = ladder
        self.after_step = after_step  # runs in each step's transaction (webhook events)
        self.state = ProjectionState(log_public_key, ladder_rule=ladder_rule)
        self.rating_lag = rating_lag
        self.clock = clock
        self._refreshed_at = -float("inf")  # when the projector last refreshed ratings (``clock``)
        self._current = True  # ``state`` is what the database held at ``state.next_index`` (empty at 0)

    async def resume(self) -> None:
        """On taking the lease: :meth:`load` unless nothing was projected since ``state`` was (the usual
        case when the lease was taken at start-up, right after a load; the projected size only grows, and
        only the lease holder moves it)."""
        if self._current and await self.store.projected_size() == self.state.next_index:
            return
        await self.load()

    async def load(self) -> None:
        """Rebuild the in-memory state from what is already projected (after start or a failed step).
        The rows are read on the event loop; parsing and feeding them, a pass over every snapshot,
        approval and evidence item of the log, runs in a worker thread on a state no one else sees yet,
        so that a process taking the lease over keeps serving meanwhile."""
        self._current = False
        size = await self.store.projected_size()
        snapshots = await self.log_store.leaves_of_kind(RATING_SNAPSHOT.predicate_type, size)
        approvals = await self.log_store.leaves_of_kind(MARKETPLACE_APPROVAL.predicate_type, size)
        evidence = await self.store.evidence_since(0, size)
        self.state = await asyncio.to_thread(self._rebuilt, size, snapshots, approvals, evidence)
        await self.backfill_ladder()
        self._current = True

    def _rebuilt(
        self,
        size: int,
        snapshots: list[tuple[int, bytes]],
        approvals: list[tuple[int, bytes]],
        evidence: list[EvidenceRow],
    ) -> ProjectionState:
        state = ProjectionState(self.log_public_key, ladder_rule=self.ladder_rule)
        state.next_index = size
        state.replay(snapshots, approvals, ((row.index, row.item) for row in evidence))
        return state

    async def backfill_ladder(self) -> None:
        """Derive once the ladder rows of entries projected before the ladder existed (migration 0013),
        replaying the log from its start under the current rule (docs/evidence-ladder.md)."""
        below = 0 if self.ladder is None else await self.ladder.backfill_below()
        if self.ladder is None or below == 0:
            return
        state = ProjectionState(self.log_public_key, ladder_rule=self.ladder_rule)
        rows = []
        for start in range(0, below, self.batch):
            entries = await self.log_store.entries(start, min(below, start + self.batch))
            rows += project([(e.index, e.leaf) for e in entries], state, verify=False).ladder
        if await self.ladder.backfill(rows, below):
            log.info("ladder: derived %d rows for the %d entries projected before it", len(rows), below)

    async def step(self) -> Projected | None:
        try:
            return await self.store.step(
                lambda rows: project(rows, self.state, verify=False), self.batch, self.after_step
            )
        except BaseException:
            await self.load()  # the transaction rolled back: so must the in-memory state
            raise

    async def catch_up(self) -> None:
        """Project everything new. Ratings are refreshed when a run finds nothing new (ingest paused:
        they then reflect everything projected) and, while entries keep arriving, at least every
        ``rating_lag`` seconds, so that a refresh's fixed cost (scoring, the rating table's write) is
        shared by every step in between instead of paid per step (docs/service.md, "From log to ratings")."""
        stepped = False
        while await self._step_or_refresh() is not None:
            stepped = True
            if self.clock() - self._refreshed_at >= self.rating_lag:
                await self._refresh()
        if not stepped:
            await self._refresh()

    async def _step_or_refresh(self) -> Projected | None:
        """:meth:`step`; if it fails, first refresh the ratings, so that steps committed before it (whose
        refresh was deferred) are not held back for as long as the failure lasts."""
        try:
            return await self.step()
        except Exception:
            await self._refresh()
            raise

    async def _refresh(self) -> None:
        self._refreshed_at = self.clock()
        await self.ratings.refresh()


async def rederive(dsn: str, log_public_key: bytes, ladder_rule: str = CURRENT_RULE) -> int | None:
    """At start-up, before a projector loads: derive the evidence (and ladder rows, each under its rule) of
    every projected entry again when the database holds evidence derived under other versions than
    :data:`RECORDED` (a release changed the reporter-standing policy, the work-record derivation or how
    ladder rows are derived; :func:`projection_tables.rederive`). Returns how many entries were derived
    again (0 on an empty database), None if the evidence was current."""
    state = ProjectionState(log_public_key, ladder_rule=ladder_rule)
    started = time.monotonic()
    size = await projection_tables.rederive(
        dsn, lambda rows, rules: project(rows, state, verify=False, ladder_rules=rules)
    )
    if size:
        log.warning(
            "derived the evidence of %d projected entries again under %s in %.1f s (the database held "
            "evidence derived under other versions, or under unrecorded ones); ratings follow at the "
            "next refresh",
            size,
            ", ".join(f"{part} {version}" for part, version in sorted(RECORDED.items())),
            time.monotonic() - started,
        )
    return size
