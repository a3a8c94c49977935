"""SQL of webhooks: subscriptions, the event outbox, deliveries and their attempts (docs/webhooks.md).

:func:`derive` runs inside the projector's transaction (the one that advances ``projection_state``), so
events and their deliveries are committed exactly when the entries that caused them are projected: a
crash before the commit projects them again, after it the outbox holds them.
"""

from __future__ import annotations

import contextlib
import datetime as dt
from collections import Counter
from collections.abc import AsyncIterator, Collection
from dataclasses import dataclass

import asyncpg

from trustscore.errors import StorageError
from trustscore.kinds.cards import CARD_PREDICATE_TYPES, AgentCard
from trustscore.kinds.events import EVENT, Event
from trustscore.kinds.reverification import REVERIFICATION, Reverification
from trustscore.kinds.scope_run import SCOPE_EXAM, SCOPE_RUN, ScopeRun
from trustscore.kinds.settlements import SETTLEMENT, Settlement
from trustscore.kinds.sittings import SITTING_CLOSE, SittingClose
from trustscore.kinds.snapshots import RATING_SNAPSHOT, RatingSnapshot
from trustscore.kinds.subscriptions import (
    SUBSCRIPTION,
    SUBSCRIPTION_REVOCATION,
    Subscription,
    SubscriptionRevocation,
)
from trustscore.ledger import audit
from trustscore.ledger.statements import parse_time
from trustscore.reverify.status import standing
from trustscore.scope.report import escalation_after
from trustscore.scope.runs import collect
from trustscore.store import scope as scope_store
from trustscore.store.log import newest_of_kinds
from trustscore.webhooks import events as ev
from trustscore.webhooks.events import GradeOf, WebhookEvent
from trustscore.webhooks.matching import Active, ActiveSubscriptions

Conn = asyncpg.Connection | asyncpg.pool.PoolConnectionProxy
CAUSE_KINDS = (
    *CARD_PREDICATE_TYPES,
    EVENT.predicate_type,
    SETTLEMENT.predicate_type,
    RATING_SNAPSHOT.predicate_type,
    REVERIFICATION.predicate_type,
    SITTING_CLOSE.predicate_type,
    SCOPE_RUN.predicate_type,
    SUBSCRIPTION.predicate_type,
    SUBSCRIPTION_REVOCATION.predicate_type,
)
_DISPATCH_LOCK = 0x77686F6B  # advisory lock held by the one dispatcher of a deployment


@dataclass(frozen=True)
class Due:
    """The oldest undelivered event of one (subscription, agent) pair, due now."""

    subscription: int
    event_seq: int
    attempts: int
    url: str
    event_id: str
    payload: bytes


@dataclass(frozen=True)
class Attempt:
    event_seq: int
    event_id: str
    type: str
    agent: str
    attempt: int
    at: dt.datetime
    status: int | None
    error: str | None
    millis: int
    state: str  # the delivery's state now: pending, delivered or dead


@dataclass(frozen=True)
class StoredEvent:
    seq: int
    id: str
    type: str
    agent: str
    at: dt.datetime
    payload: bytes


async def _active(conn: Conn) -> ActiveSubscriptions:
    """The active subscriptions from the table's columns (no statement is parsed)."""
    rows = await conn.fetch(
        "SELECT id, subscriber, events, agents, threshold FROM webhook_subscriptions WHERE revoked_at IS NULL"
    )
    return ActiveSubscriptions(
        Active.row(r["id"], r["subscriber"], r["events"], r["agents"], r["threshold"]) for r in rows
    )


class KeptSubscriptions:
    """The active subscriptions as of a projected log position, kept by one projector between its steps
    (audit HIGH 1: reading and parsing every active subscription at each step cost O(their bytes)).

    They are a function of the log up to that position, so they are used again only by the step that
    starts there; a step that starts elsewhere (another process projected meanwhile) reads them from the
    table. A step takes them and gives them back only when it is done: one that fails, or whose
    transaction rolls back after it (its next step starts where it started), leaves none behind."""

    def __init__(self) -> None:
        self._at: int | None = None
        self._subs: ActiveSubscriptions | None = None

    async def take(self, conn: Conn, start: int) -> ActiveSubscriptions:
        subs, at = self._subs, self._at
        self._subs = self._at = None
        if subs is None or at != start:
            subs = await _active(conn)
        return subs

    def give(self, subs: ActiveSubscriptions, end: int) -> None:
        self._subs, self._at = subs, end

    def skip(self, start: int, end: int) -> None:
        """A step over ``[start, end)`` with no entry that changes subscriptions or causes events."""
        if self._at == start:
            self._at = end


def _card_of(leaf: bytes | None) -> AgentCard | None:
    if leaf is None:
        return None
    p = audit.parse_leaf(bytes(leaf)).statement.predicate
    return p if isinstance(p, AgentCard) else None


async def _previous_card(conn: Conn, agent: str, index: int) -> AgentCard | None:
    return (await _cards_before(conn, [agent], index))[agent]


async def _cards_before(conn: Conn, agents: list[str], index: int) -> dict[str, AgentCard | None]:
    """:func:`_previous_card` of each of ``agents`` at ``index`` in one query (an index probe per agent
    and card kind): a batch of new cards costs one round trip, not one per card."""
    found = await newest_of_kinds(conn, agents, CARD_PREDICATE_TYPES, 1, before=index)
    return {a: _card_of(found[a][0][1]) if a in found else None for a in agents}


async def _leaves(conn: Conn, indexes: list[int]) -> dict[int, bytes]:
    """The leaves of the entries at ``indexes``, in one round trip (an index lookup each)."""
    if not indexes:
        return {}
    rows = await conn.fetch(
        "SELECT e.idx, e.leaf FROM unnest($1::bigint[]) AS t(idx) JOIN entries e ON e.idx = t.idx", indexes
    )
    return {r["idx"]: bytes(r["leaf"]) for r in rows}


async def _previous_totals(conn: Conn, snap: RatingSnapshot, index: int) -> dict[str, int | None]:
    rows = await conn.fetch(
        "SELECT DISTINCT ON (s.agent) s.agent, s.total FROM unnest($1::text[]) AS t(agent) "
        "JOIN snapshots s ON s.agent = t.agent WHERE s.model_version = $2 AND s.idx < $3 "
        "ORDER BY s.agent, s.idx DESC",
        [r.agent for r in snap.ratings],
        snap.model_version,
        index,
    )
    return {r["agent"]: r["total"] for r in rows}


async def _verified_changed(conn: Conn, index: int, agent: str, r: Reverification) -> list[WebhookEvent]:
    """Compare the agent's standing before and after its re-verification statement at ``index``, both
    against the endpoint of the card in force at that index (reverify/status.py ``standing``)."""
    # A standing rests on the last run (reverify/status.py): the one before this, not every earlier run.
    leaf = await conn.fetchval(
        "SELECT leaf FROM entries WHERE kind = $1 AND subject = $2 AND idx < $3 ORDER BY idx DESC LIMIT 1",
        REVERIFICATION.predicate_type,
        agent,
        index,
    )
    earlier = []
    if leaf is not None:
        p = audit.parse_leaf(bytes(leaf)).statement.predicate
        assert isinstance(p, Reverification)
        earlier.append(p)
    card = await _previous_card(conn, agent, index)
    endpoint = None if card is None else card.endpoint
    run = {"outcome": r.outcome, "matched_millis": r.matched_millis, "report_index": r.report_index}
    return ev.verified_changed(
        index,
        agent,
        parse_time(r.ran_at, what="ran_at"),
        standing(earlier, endpoint),
        standing([*earlier, r], endpoint),
        run,
    )


async def _scope_status_changed(conn: Conn, index: int, agent: str) -> list[WebhookEvent]:
    """Compare the agent's escalation status before and after the scope run closed at ``index``
    (scope/report.py ``escalation_after``), from its cards and scope sittings logged up to it."""
    rows = await conn.fetch(
        "SELECT idx, leaf FROM entries WHERE subject = $1 AND kind = ANY($2::text[]) AND idx <= $3 ORDER BY idx",
        agent,
        list(scope_store.KINDS),
        index,
    )
    stmts = [(r["idx"], audit.parse_leaf(bytes(r["leaf"])).statement) for r in rows]
    runs = collect(agent, stmts)[1]
    if not runs or runs[-1].close_index != index:
        return []  # a close of a sitting whose open is not the agent's scope sitting
    before, _, _ = escalation_after(runs[:-1])
    after, reasons, week = escalation_after(runs)
    scores = None if week is None else {"shs": week.shs, "da": week.da, "ft": week.ft, "ba": week.ba}
    return ev.scope_status_changed(index, agent, runs[-1].at, before, after, reasons, scores)


async def derive(
    conn: Conn, start: int, end: int, grade_of: GradeOf, kept: KeptSubscriptions | None = None
) -> int:
    """Record the events caused by log entries [start, end) and fan each out to the subscriptions active
    at its index, in ``conn``'s transaction; return how many events were new. ``kept``: the projector's
    subscriptions between steps (none: read from the table)."""
    kept = KeptSubscriptions() if kept is None else kept
    rows = await conn.fetch(  # a card's leaf only where it is compared (below)
        "SELECT idx, kind, subject, CASE WHEN kind = ANY($4::text[]) THEN NULL ELSE leaf END AS leaf "
        "FROM entries WHERE idx >= $1 AND idx < $2 AND kind = ANY($3::text[]) ORDER BY idx",
        start,
        end,
        list(CAUSE_KINDS),
        list(CARD_PREDICATE_TYPES),
    )
    if not rows:
        kept.skip(start, end)
        return 0
    subs = await kept.take(conn, start)
    # The card before each new card: looked up at once for the range, then kept up to date in order. A
    # card is read only if a card comes before it (the agent had one, or has two in the range): an
    # agent's first card causes no event, and most new cards are first cards.
    card_rows = [r for r in rows if r["kind"] in CARD_PREDICATE_TYPES]
    in_range = Counter(r["subject"] for r in card_rows)
    cards = await _cards_before(conn, sorted(in_range), start) if in_range else {}
    leaves = await _leaves(
        conn, [r["idx"] for r in card_rows if cards[r["subject"]] is not None or in_range[r["subject"]] > 1]
    )
    new = 0
    for r in rows:
        index = r["idx"]
        leaf = r["leaf"] if r["leaf"] is not None else leaves.get(index)
        if leaf is None:  # a first card, and its agent's only card in the range
            continue
        stmt = audit.parse_leaf(bytes(leaf)).statement
        p = stmt.predicate
        found: list[WebhookEvent] = []
        if isinstance(p, Subscription):
            await conn.execute(
                "INSERT INTO webhook_subscriptions (id, subscriber, url, events, agents, threshold) "
                "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (id) DO NOTHING",
                index, p.subscriber, p.url, list(p.events), list(p.agents), p.threshold,
            )  # fmt: skip
            subs.add(Active.of(index, p))
        elif isinstance(p, SubscriptionRevocation):
            owner = subs.get(p.subscription)
            if owner is not None and owner.subscriber == p.subscriber:  # only its subscriber may end it
                await conn.execute(
                    "UPDATE webhook_subscriptions SET revoked_at = $2 WHERE id = $1 AND revoked_at IS NULL",
                    p.subscription,
                    index,
                )
                subs.remove(p.subscription)
        elif isinstance(p, AgentCard):
            subject = stmt.facts.subject
            previous = cards[subject] if subject in cards else await _previous_card(conn, subject, index)
            cards[subject] = p
            found = ev.card_changed(index, p, previous, subject)
        elif isinstance(p, Settlement):
            found = ev.negative_settlement(index, p)
        elif isinstance(p, Event):
            found = ev.negative_event(index, p)
        elif isinstance(p, Reverification):
            found = await _verified_changed(conn, index, stmt.facts.subject, p)
        elif isinstance(p, SittingClose | ScopeRun) and p.exam == SCOPE_EXAM:
            found = await _scope_status_changed(conn, index, p.agent)
        elif isinstance(p, RatingSnapshot):
            found = ev.rating_changes(index, p, await _previous_totals(conn, p, index), grade_of)
        for e in found:
            new += await _record(conn, e, subs)
    kept.give(subs, end)
    return new


async def _record(conn: Conn, e: WebhookEvent, subs: ActiveSubscriptions) -> int:
    seq = await conn.fetchval(
        "INSERT INTO webhook_events (id, idx, type, agent, at, payload) VALUES ($1, $2, $3, $4, $5, $6) "
        "ON CONFLICT (id) DO NOTHING RETURNING seq",
        e.id, e.index, e.type, e.agent, e.at, e.body,
    )  # fmt: skip
    if seq is None:
        return 0
    targets = [(sid, seq, e.agent) for sid in subs.matching(e)]
    if targets:
        await conn.executemany(
            "INSERT INTO webhook_deliveries (subscription, event_seq, agent) VALUES ($1, $2, $3)", targets
        )
    return 1


class WebhookStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def due(
        self, limit: int, per_host: int = 2**31 - 1, busy: Collection[tuple[int, int]] = ()
    ) -> list[Due]:
        """The head of each (subscription, agent) queue whose next attempt is due: deliveries of one agent
        go out one at a time and in order, a retrying head holding back those behind it. Heads ``busy``
        (subscription, event_seq: in flight) are left out, and at most ``per_host`` are given for one URL
        host (webhooks/matching.py ``host_key``), so that the heads of many subscriptions to one slow host do not fill
        the ``limit`` and hold back everyone else's."""
        rows = await self.pool.fetch(
            "SELECT d.subscription, d.event_seq, d.attempts, d.url, e.id, e.payload FROM ("
            " SELECT h.subscription, h.event_seq, h.attempts, h.next_at, s.url, row_number() OVER ("
            # the URL's host as matching.host_key gives it: lower case, without port or trailing dot
            "  PARTITION BY rtrim(regexp_replace(lower(substring(s.url from '^[A-Za-z][A-Za-z0-9+.-]*://"
            "([^/?#]*)')), ':[0-9]*$', ''), '.') ORDER BY h.next_at, h.event_seq) AS nth FROM ("
            "  SELECT DISTINCT ON (subscription, agent) subscription, event_seq, attempts, next_at"
            "  FROM webhook_deliveries WHERE state = 'pending' ORDER BY subscription, agent, event_seq) h"
            " JOIN webhook_subscriptions s ON s.id = h.subscription AND s.revoked_at IS NULL"
            " WHERE h.next_at <= now() AND NOT EXISTS (SELECT 1 FROM unnest($3::bigint[], $4::bigint[]) AS"
            "  b(subscription, event_seq) WHERE b.subscription = h.subscription AND b.event_seq = h.event_seq)"
            ") d JOIN webhook_events e ON e.seq = d.event_seq"
            " WHERE d.nth <= $2 ORDER BY d.next_at, d.event_seq LIMIT $1",
            limit,
            per_host,
            [b[0] for b in busy],
            [b[1] for b in busy],
        )
        return [
            Due(r["subscription"], r["event_seq"], r["attempts"], r["url"], r["id"], bytes(r["payload"]))
            for r in rows
        ]

    async def open_subscriptions(self, subscriber: str) -> int:
        """How many subscriptions ``subscriber`` has logged that no projected revocation ended: those
        logged but not projected yet count, and so do those whose revocation is not projected yet."""
        n: int = await self.pool.fetchval(
            "SELECT count(*) FROM entries e WHERE e.subject = $1 AND e.kind = $2 AND NOT EXISTS ("
            " SELECT 1 FROM webhook_subscriptions s WHERE s.id = e.idx AND s.revoked_at IS NOT NULL)",
            subscriber,
            SUBSCRIPTION.predicate_type,
        )
        return n

    async def record(
        self, d: Due, status: int | None, error: str | None, millis: int, state: str, retry_in: float
    ) -> bool:
        """Log attempt ``d.attempts + 1`` and move the delivery to ``state`` (pending: retry in ``retry_in``
        s); False, with nothing changed, when another dispatcher recorded that attempt first (one whose
        lock's session was lost while it sent: services/webhooks.py): its record stands (attempts are
        append-only). The delivery's count moves from ``d.attempts`` only (compare and set); a count
        that does not match its logged attempts is an error, raised, never skipped round after round."""
        try:
            async with self.pool.acquire() as conn, conn.transaction():
                await conn.execute(
                    "INSERT INTO webhook_attempts (subscription, event_seq, attempt, status, error, millis) "
                    "VALUES ($1, $2, $3, $4, $5, $6)",
                    d.subscription, d.event_seq, d.attempts + 1, status, error, millis,
                )  # fmt: skip
                moved: str = await conn.execute(
                    "UPDATE webhook_deliveries SET state = $3, attempts = attempts + 1, "
                    "next_at = now() + make_interval(secs => $4) "
                    "WHERE subscription = $1 AND event_seq = $2 AND attempts = $5",
                    d.subscription, d.event_seq, state, retry_in, d.attempts,
                )  # fmt: skip
                if moved != "UPDATE 1":
                    raise StorageError(
                        f"delivery ({d.subscription}, {d.event_seq}): its attempt count is not "
                        f"{d.attempts}, though attempt {d.attempts + 1} was not logged"
                    )
        except asyncpg.UniqueViolationError:
            recorded = await self.pool.fetchval(
                "SELECT attempts > $3 FROM webhook_deliveries WHERE subscription = $1 AND event_seq = $2",
                d.subscription, d.event_seq, d.attempts,
            )  # fmt: skip
            if recorded:
                return False
            raise
        return True

    async def attempts(self, sid: int, before: tuple[int, int] | None, limit: int) -> list[Attempt]:
        """Attempts for subscription ``sid``, newest first, after the cursor (event_seq, attempt)."""
        cursor = before or (2**63 - 1, 0)
        rows = await self.pool.fetch(
            "SELECT e.id, e.type, e.agent, a.event_seq, a.attempt, a.at, a.status, a.error, a.millis, d.state "
            "FROM webhook_attempts a JOIN webhook_events e ON e.seq = a.event_seq "
            "JOIN webhook_deliveries d ON d.subscription = a.subscription AND d.event_seq = a.event_seq "
            "WHERE a.subscription = $1 AND (a.event_seq, a.attempt) < ($2, $3) "
            "ORDER BY a.event_seq DESC, a.attempt DESC LIMIT $4",
            sid, cursor[0], cursor[1], limit,
        )  # fmt: skip
        return [
            Attempt(
                r["event_seq"],
                r["id"],
                r["type"],
                r["agent"],
                r["attempt"],
                r["at"],
                r["status"],
                r["error"],
                r["millis"],
                r["state"],
            )
            for r in rows
        ]

    async def events(self, agent: str | None, limit: int) -> list[StoredEvent]:
        """The newest ``limit`` events (of ``agent``, or of every agent), newest first."""
        rows = await self.pool.fetch(
            "SELECT seq, id, type, agent, at, payload FROM webhook_events "
            "WHERE $1::text IS NULL OR agent = $1 ORDER BY seq DESC LIMIT $2",
            agent,
            limit,
        )
        return [
            StoredEvent(r["seq"], r["id"], r["type"], r["agent"], r["at"], bytes(r["payload"])) for r in rows
        ]

    async def counts(self, sid: int) -> dict[str, int]:
        rows = await self.pool.fetch(
            "SELECT state, count(*) AS n FROM webhook_deliveries WHERE subscription = $1 GROUP BY state", sid
        )
        return {r["state"]: r["n"] for r in rows}

    async def try_lock(self, conn: Conn) -> bool:
        got: bool = await conn.fetchval("SELECT pg_try_advisory_lock($1)", _DISPATCH_LOCK)
        return got

    async def confirm(self, conn: Conn) -> None:
        """Raise unless ``conn``'s session is still alive, and with it a session lock it took (a lost
        session released every lock it held)."""
        await conn.fetchval("SELECT 1")

    async def unlock(self, conn: Conn) -> None:
        await conn.execute("SELECT pg_advisory_unlock($1)", _DISPATCH_LOCK)

    @contextlib.asynccontextmanager
    async def dispatch_lock(self, conn: Conn) -> AsyncIterator[bool]:
        """The deployment's dispatch lock on ``conn`` for the block (yields whether it was free). The
        pool does not reset sessions on release (store/db.py), so a session that may still hold the lock
        (its lock or unlock call failed or was cancelled) is ended instead of going back to the pool."""
        try:
            got = await self.try_lock(conn)
        except BaseException:
            conn.terminate()
            raise
        try:
            yield got
        finally:
            if got:
                try:
                    await self.unlock(conn)
                except BaseException:
                    conn.terminate()
                    raise
