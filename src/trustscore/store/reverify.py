"""SQL of re-verification runs and the log reads a run needs."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import asyncpg

from trustscore.kinds.cards import CARD_PREDICATE_TYPES, AgentCard
from trustscore.kinds.exam_report import EXAM_REPORT
from trustscore.ledger import audit
from trustscore.store.log import index_by_nonce, newest_of_kinds

#: How far ahead of the database's clock a worker's may be and still fix the checkpoint of a period the
#: database has not reached yet (its seeds are then known that much earlier).
CLOCK_TOLERANCE_MS = 60_000


@dataclass(frozen=True)
class Run:
    agent: str
    report_index: int
    seed: bytes
    trigger: str
    checkpoint_size: int
    endpoint: str
    attempts: int


class ReverifyStore:
    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool

    async def schedule(self, run: Run) -> bool:
        """Add a pending run; False when that run (agent, report, seed) is already known."""
        status: str = await self.pool.execute(
            "INSERT INTO reverify_runs (agent, report_index, seed, trigger, checkpoint_size, endpoint) "
            "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
            run.agent,
            run.report_index,
            run.seed,
            run.trigger,
            run.checkpoint_size,
            run.endpoint,
        )
        return status.endswith(" 1")

    async def period_checkpoint(self, period_start_ms: int, size: int) -> int | None:
        """The checkpoint size that seeds the scheduled runs of the period starting at ``period_start_ms``:
        ``size`` when this is the first scheduling of the period, else the size fixed by the first
        (migration 0023); None, with nothing fixed, for a period that does not begin within
        :data:`CLOCK_TOLERANCE_MS` by the database's clock (a worker whose clock runs far ahead must not
        fix a future period's seeds; one a little ahead, as two hosts' clocks are, must not miss its
        period). Two statements: the second reads what a concurrent first one committed."""
        await self.pool.execute(
            "INSERT INTO reverify_periods (period_start_ms, checkpoint_size) SELECT $1::bigint, $2::bigint "
            "WHERE $1::bigint <= extract(epoch FROM now()) * 1000 + $3 ON CONFLICT (period_start_ms) DO NOTHING",
            period_start_ms,
            size,
            CLOCK_TOLERANCE_MS,
        )
        fixed: int | None = await self.pool.fetchval(
            "SELECT checkpoint_size FROM reverify_periods WHERE period_start_ms = $1", period_start_ms
        )
        return fixed

    async def reporting_since(self, index: int) -> set[str]:
        """The agents with an exam report at ``index`` or later (the log's subject column)."""
        rows = await self.pool.fetch(
            "SELECT DISTINCT subject FROM entries WHERE kind = $1 AND idx >= $2",
            EXAM_REPORT.predicate_type,
            index,
        )
        return {r["subject"] for r in rows}

    async def pending_agents(self) -> set[str]:
        """Agents with a run not yet carried out."""
        rows = await self.pool.fetch("SELECT DISTINCT agent FROM reverify_runs WHERE state = 'pending'")
        return {r["agent"] for r in rows}

    async def claim(self, hold: float) -> Run | None:
        """The pending run due first, its attempt counted and held for ``hold`` seconds; runs not yet due
        (after a failure, or held by a claim) and rows another worker is claiming are skipped (migration
        0020).

        A claim is a lease on the run: nobody else claims it until ``hold`` seconds have passed, longer
        than the run's deadline (an item begun just before the deadline may still go on past it), so a
        worker that lost the job's lease while carrying a run out (its lease connection dropped: another
        worker took the job over) does not have it carried out a second time beside it. A run whose
        worker died is claimed again once its hold has passed. The attempt count is the claim's fence:
        :meth:`finish` and :meth:`retry_later` change the run only while its attempts are still the
        claim's, so a claimer overtaken after its hold never overwrites the outcome of the claim that
        took the run after it."""
        async with self.pool.acquire() as conn, conn.transaction():
            r = await conn.fetchrow(
                "SELECT agent, report_index, seed, trigger, checkpoint_size, endpoint, attempts FROM reverify_runs "
                "WHERE state = 'pending' AND not_before <= now() ORDER BY not_before, created_at "
                "LIMIT 1 FOR UPDATE SKIP LOCKED"
            )
            if r is None:
                return None
            await conn.execute(
                "UPDATE reverify_runs SET attempts = attempts + 1, updated_at = now(), "
                "not_before = now() + make_interval(secs => $4) "
                "WHERE agent = $1 AND report_index = $2 AND seed = $3",
                r["agent"],
                r["report_index"],
                r["seed"],
                hold,
            )
        return Run(
            r["agent"],
            r["report_index"],
            bytes(r["seed"]),
            r["trigger"],
            r["checkpoint_size"],
            r["endpoint"],
            r["attempts"] + 1,
        )

    async def retry_later(self, run: Run, seconds: float) -> bool:
        """Make a failed run due again ``seconds`` from now; False when the claim ``run`` came from is no
        longer the run's last (see :meth:`claim`), and nothing was changed."""
        status: str = await self.pool.execute(
            "UPDATE reverify_runs SET not_before = now() + make_interval(secs => $4), updated_at = now() "
            "WHERE agent = $1 AND report_index = $2 AND seed = $3 AND state = 'pending' AND attempts = $5",
            run.agent,
            run.report_index,
            run.seed,
            seconds,
            run.attempts,
        )
        return status.endswith(" 1")

    async def finish(self, run: Run, *, entry_index: int | None, same_as_index: int | None) -> bool:
        """Close the run claimed as ``run``; False when that claim is no longer the run's last (see
        :meth:`claim`), or the run is closed already, and nothing was changed."""
        status: str = await self.pool.execute(
            "UPDATE reverify_runs SET state = 'done', entry_index = $4, same_as_index = $5, updated_at = now() "
            "WHERE agent = $1 AND report_index = $2 AND seed = $3 AND state = 'pending' AND attempts = $6",
            run.agent,
            run.report_index,
            run.seed,
            entry_index,
            same_as_index,
            run.attempts,
        )
        return status.endswith(" 1")

    async def runs_of(self, agent: str) -> list[tuple[int, str, int | None, int | None]]:
        rows = await self.pool.fetch(
            "SELECT report_index, state, entry_index, same_as_index FROM reverify_runs WHERE agent = $1 "
            "ORDER BY created_at",
            agent,
        )
        return [(r["report_index"], r["state"], r["entry_index"], r["same_as_index"]) for r in rows]

    async def leaf(self, index: int) -> bytes | None:
        v = await self.pool.fetchval("SELECT leaf FROM entries WHERE idx = $1", index)
        return None if v is None else bytes(v)

    async def last_of(self, kind: str, subject: str) -> tuple[int, bytes] | None:
        """(index, leaf) of the newest entry of ``kind`` about ``subject``, if any."""
        row = await self.pool.fetchrow(
            "SELECT idx, leaf FROM entries WHERE kind = $1 AND subject = $2 ORDER BY idx DESC LIMIT 1",
            kind,
            subject,
        )
        return None if row is None else (row["idx"], bytes(row["leaf"]))

    async def leaves_after(
        self, kind: str, after: Mapping[str, int]
    ) -> dict[str, list[tuple[int, bytes, bytes | None]]]:
        """(index, leaf hash, leaf) of every entry of ``kind`` about each subject of ``after`` at or after
        the index given for it (-1: all of them), in log order, in one query (the (subject, kind, idx)
        index); a subject without any is left out. The entry at the given index itself comes without its
        leaf (None): its leaf hash tells whether it is still the entry the caller read there."""
        if isinstance(after, str):  # a str is not a mapping of subjects: a caller's mistake
            raise TypeError("after maps each subject to an index")
        subjects = sorted(after)
        rows = await self.pool.fetch(
            "SELECT t.subject, e.idx, e.leaf_hash, CASE WHEN e.idx > t.after THEN e.leaf END AS leaf "
            "FROM unnest($2::text[], $3::bigint[]) AS t(subject, after) "
            "JOIN entries e ON e.subject = t.subject AND e.kind = $1 AND e.idx >= t.after "
            "ORDER BY t.subject, e.idx",
            kind,
            subjects,
            [after[s] for s in subjects],
        )
        out: dict[str, list[tuple[int, bytes, bytes | None]]] = {}
        for r in rows:
            leaf = r["leaf"]
            out.setdefault(r["subject"], []).append(
                (r["idx"], bytes(r["leaf_hash"]), None if leaf is None else bytes(leaf))
            )
        return out

    async def entry_by_nonce(self, signer: str, nonce: str) -> int | None:
        return await index_by_nonce(self.pool, signer, nonce)

    async def endpoints(self, agents: set[str] | None) -> dict[str, str]:
        """The endpoint each of ``agents`` (None: every agent) declares in its newest card, if any. Named
        agents are looked up one probe per card kind each (store.log.newest_of_kinds: not every version
        of a card updated many times); every agent by one pass over the cards."""
        if agents is not None:
            found = await newest_of_kinds(self.pool, agents, CARD_PREDICATE_TYPES, 1)
            leaves = [(agent, cards[0][1]) for agent, cards in found.items()]
        else:
            rows = await self.pool.fetch(
                "SELECT DISTINCT ON (subject) subject, leaf FROM entries WHERE kind = ANY($1::text[]) "
                "AND subject IN (SELECT id FROM keys WHERE kind = 'agent') ORDER BY subject, idx DESC",
                list(CARD_PREDICATE_TYPES),
            )
            leaves = [(r["subject"], bytes(r["leaf"])) for r in rows]
        out = {}
        for agent, leaf in leaves:
            card = audit.parse_leaf(leaf).statement.predicate
            if isinstance(card, AgentCard) and card.endpoint:
                out[agent] = card.endpoint
        return out
