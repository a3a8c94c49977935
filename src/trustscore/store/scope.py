"""SQL for scope honesty: an agent's cards and scope sittings, as stored leaves (docs/scope-honesty.md)."""

from __future__ import annotations

from typing import Literal

import asyncpg

from trustscore.kinds.cards import CARD_PREDICATE_TYPES
from trustscore.kinds.scope_run import SCOPE_RUN
from trustscore.kinds.sittings import SITTING_CLOSE, SITTING_OPEN
from trustscore.store.log import index_by_nonce, kinds_since, newest_of_kinds, sequenced_size

KINDS = (
    *CARD_PREDICATE_TYPES,
    SITTING_OPEN.predicate_type,
    SITTING_CLOSE.predicate_type,
    SCOPE_RUN.predicate_type,
)


Mark = Literal["scope_cards", "scope_period"]  # the runner's rows of projection_state (migration 0019)


class ScopeStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def newest_card(self, agent: str) -> bytes | None:
        """The leaf of ``agent``'s newest agent card (v1 or v2), if any."""
        found = (await newest_of_kinds(self.pool, [agent], CARD_PREDICATE_TYPES, 1)).get(agent)
        return None if found is None else found[0][1]

    async def leaf(self, index: int) -> bytes | None:
        leaf = await self.pool.fetchval("SELECT leaf FROM entries WHERE idx = $1", index)
        return None if leaf is None else bytes(leaf)

    async def agent_leaves(
        self, agent: str, before: int | None = None, start: int = 0
    ) -> list[tuple[int, bytes]]:
        """(index, leaf) of every card and sitting open/close about ``agent`` logged at ``start`` or later
        (and below ``before``, if given), in log order."""
        rows = await self.pool.fetch(
            "SELECT idx, leaf FROM entries WHERE subject = $1 AND kind = ANY($2::text[]) "
            "AND ($3::bigint IS NULL OR idx < $3) AND idx >= $4 ORDER BY idx",
            agent,
            list(KINDS),
            before,
            start,
        )
        return [(r["idx"], bytes(r["leaf"])) for r in rows]

    async def newest_cards(
        self, agents: list[str] | None, before: int | None = None, count: int = 2
    ) -> dict[str, list[tuple[int, bytes]]]:
        """The ``count`` newest cards (index, leaf), newest first, of each of ``agents`` (None: every
        agent), below index ``before`` if given (the log's size: then each lookup reads only the newest
        cards even of an agent with thousands of versions, store.log.newest_of_kinds).

        Named agents are looked up one by one (two entries of each from the ``(subject, kind, idx)``
        index): one query over every card of the log, filtered by agent, cost a scan of the kind index over
        all the cards of a partition per sweep (at 10^7 entries the largest share of PostgreSQL's time
        during card ingest, bench/README.md), and so did each lookup while the index was on subject alone
        (migrations/0021_entries_subject_kind.sql)."""
        if agents is not None:
            return await newest_of_kinds(self.pool, agents, CARD_PREDICATE_TYPES, count, before)
        rows = await self.pool.fetch(
            "SELECT subject, idx, leaf FROM (SELECT subject, idx, leaf, row_number() OVER "
            "(PARTITION BY subject ORDER BY idx DESC) AS rn FROM entries WHERE kind = ANY($1::text[]) "
            "AND ($3::bigint IS NULL OR idx < $3)) t WHERE rn <= $2 ORDER BY subject, idx DESC",
            list(CARD_PREDICATE_TYPES),
            count,
            before,
        )
        out: dict[str, list[tuple[int, bytes]]] = {}
        for r in rows:
            out.setdefault(r["subject"], []).append((r["idx"], bytes(r["leaf"])))
        return out

    async def mark(self, name: Mark) -> int:
        """Where the runner stopped: ``scope_cards``, the index the sweep of new cards goes on from;
        ``scope_period``, the start (Unix seconds) of the period last scheduled."""
        n: int = await self.pool.fetchval("SELECT next_index FROM projection_state WHERE name = $1", name)
        return n

    async def advance(self, name: Mark, value: int) -> None:
        """Move mark ``name`` on to ``value`` (never back)."""
        await self.pool.execute(
            "UPDATE projection_state SET next_index = GREATEST(next_index, $2) WHERE name = $1", name, value
        )

    async def set_mark(self, name: Mark, value: int) -> None:
        """Set mark ``name`` to ``value``, back or forth."""
        await self.pool.execute("UPDATE projection_state SET next_index = $2 WHERE name = $1", name, value)

    async def log_size(self) -> int:
        """Entries sequenced so far (store.log.sequenced_size)."""
        return await sequenced_size(self.pool)

    async def cards_since(self, index: int, limit: int = 10_000) -> tuple[dict[str, str], int]:
        """Each agent with a card logged at or after ``index`` (at most ``limit`` cards of each kind), with
        the kind of its newest of those cards, and the index to read from next
        (:func:`~trustscore.store.log.kinds_since`: a page reads ``limit`` cards of the (kind, idx) index,
        never every card after ``index``)."""
        rows, _ = await kinds_since(self.pool, CARD_PREDICATE_TYPES, index, limit)
        newest = {r["subject"]: r["kind"] for r in rows}  # in log order: each agent's last card stays
        return newest, (rows[-1]["idx"] + 1 if rows else index)  # a page ends at its last card

    async def schedule_run(self, agent: str, run_key: str, trigger: str, max_pending: int) -> bool:
        """Add a pending run unless that (agent, run key) is known, the agent already has one pending, or
        ``max_pending`` runs wait already; True when added."""
        status: str = await self.pool.execute(
            "INSERT INTO scope_runs (agent, run_key, trigger) SELECT $1, $2, $3 "
            "WHERE (SELECT count(*) FROM scope_runs WHERE state = 'pending') < $4 ON CONFLICT DO NOTHING",
            agent,
            run_key,
            trigger,
            max_pending,
        )
        return status.endswith(" 1")

    async def recent_run(self, agent: str, trigger: str, seconds: float) -> bool:
        """Whether a run of ``agent`` with ``trigger`` was scheduled within the last ``seconds``."""
        recent: bool = await self.pool.fetchval(
            "SELECT EXISTS (SELECT 1 FROM scope_runs WHERE agent = $1 AND trigger = $2 "
            "AND created_at > now() - make_interval(secs => $3))",
            agent,
            trigger,
            seconds,
        )
        return recent

    async def run_known(self, agent: str, run_key: str) -> bool:
        """Whether the run (agent, run key) has a row (pending, done or skipped)."""
        known: bool = await self.pool.fetchval(
            "SELECT EXISTS (SELECT 1 FROM scope_runs WHERE agent = $1 AND run_key = $2)", agent, run_key
        )
        return known

    async def claim_run(self, hold: float) -> tuple[str, str, str, int] | None:
        """The pending run due first (agent, run key, trigger, attempts with this one), its attempt
        counted and held for ``hold`` seconds; runs not yet due (after a failure, or held by a claim) and
        rows another worker is claiming are skipped (migration 0020). A claim is a lease on the run, and
        its attempt count the fence of :meth:`finish_run` and :meth:`retry_later`, as for
        re-verification runs (store/reverify.py, ``ReverifyStore.claim``)."""
        async with self.pool.acquire() as conn, conn.transaction():
            r = await conn.fetchrow(
                "SELECT agent, run_key, trigger, attempts FROM scope_runs WHERE state = 'pending' "
                "AND not_before <= now() ORDER BY not_before, created_at LIMIT 1 FOR UPDATE SKIP LOCKED"
            )
            if r is None:
                return None
            await conn.execute(
                "UPDATE scope_runs SET attempts = attempts + 1, updated_at = now(), "
                "not_before = now() + make_interval(secs => $3) WHERE agent = $1 AND run_key = $2",
                r["agent"],
                r["run_key"],
                hold,
            )
        return r["agent"], r["run_key"], r["trigger"], r["attempts"] + 1

    async def retry_later(self, agent: str, run_key: str, seconds: float, *, attempt: int) -> bool:
        """Make a failed run due again ``seconds`` from now; False when its claim numbered ``attempt`` is
        no longer its last, and nothing was changed."""
        status: str = await self.pool.execute(
            "UPDATE scope_runs SET not_before = now() + make_interval(secs => $3), updated_at = now() "
            "WHERE agent = $1 AND run_key = $2 AND state = 'pending' AND attempts = $4",
            agent,
            run_key,
            seconds,
            attempt,
        )
        return status.endswith(" 1")

    async def finish_run(
        self, agent: str, run_key: str, *, attempt: int, entry_index: int | None, reason: str | None
    ) -> bool:
        """Mark the run done (its entry logged) or skipped (``reason``); False when its claim numbered
        ``attempt`` is no longer its last, or the run is closed already, and nothing was changed."""
        status: str = await self.pool.execute(
            "UPDATE scope_runs SET state = $3, entry_index = $4, reason = $5, updated_at = now() "
            "WHERE agent = $1 AND run_key = $2 AND state = 'pending' AND attempts = $6",
            agent,
            run_key,
            "done" if entry_index is not None else "skipped",
            entry_index,
            reason,
            attempt,
        )
        return status.endswith(" 1")

    async def runs_of(self, agent: str) -> list[tuple[str, str, str, int | None, str | None]]:
        """(run key, trigger, state, entry index, reason) of the agent's server runs, oldest first."""
        rows = await self.pool.fetch(
            "SELECT run_key, trigger, state, entry_index, reason FROM scope_runs WHERE agent = $1 ORDER BY created_at",
            agent,
        )
        return [(r["run_key"], r["trigger"], r["state"], r["entry_index"], r["reason"]) for r in rows]

    async def entry_by_nonce(self, signer: str, nonce: str) -> int | None:
        return await index_by_nonce(self.pool, signer, nonce)
