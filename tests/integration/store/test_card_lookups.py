"""The lookups of an agent's newest cards read that agent's entries, not every card of the log.

They filter entries by subject and by kind. With only an index on (subject, idx) beside one on (kind, idx),
PostgreSQL's planner, its statistics behind a log that grew fast, intersected both indexes: every lookup
read the whole kind index of agent cards (1.3 ms an agent at 30,000 cards, O(cards) per new card: most of
PostgreSQL's time during card ingest, bench/README.md). One index on (subject, kind, idx) serves them all.
"""

from __future__ import annotations

import json
from typing import Any

import asyncpg
import msgspec

from trustscore.cli.agent import card_envelope
from trustscore.kinds.cards import CARD_PREDICATE_TYPES
from trustscore.ledger import keys
from trustscore.ledger.submission import check, prepare
from trustscore.store import scope, webhooks
from trustscore.store.log import LogStore

CARDS = 1500
PROBED = 20


def _index_rows_read(plan: dict[str, Any]) -> int:
    """Index entries the plan's index scans returned, over all their loops."""
    own = plan.get("Actual Rows", 0) * plan.get("Actual Loops", 1) if "Index" in plan["Node Type"] else 0
    return own + sum(_index_rows_read(p) for p in plan.get("Plans", []))


async def _explain(conn: asyncpg.pool.PoolConnectionProxy, sql: str, *args: object) -> dict[str, Any]:
    text = await conn.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) {sql}", *args)
    plan: dict[str, Any] = json.loads(text)[0]["Plan"]
    return plan


async def test_card_lookups_read_the_agents_own_entries(pool: asyncpg.Pool) -> None:
    signers = [keys.SigningKey.generate() for _ in range(CARDS)]
    cards = [check(prepare(msgspec.to_builtins(card_envelope(s, "v1"))), lambda _: None) for s in signers]
    await LogStore(pool).append(cards)
    probed = sorted(s.id for s in signers[-PROBED:])
    kinds = list(CARD_PREDICATE_TYPES)
    async with pool.acquire() as conn:
        for analyzed in (False, True):  # statistics behind the log, then up to date
            if analyzed:
                await conn.execute("ANALYZE entries")
            newest_two = await _explain(conn, scope.NEWEST_TWO_CARDS, kinds, probed)
            before = await _explain(conn, webhooks.CARDS_BEFORE, probed, kinds, CARDS + 1)
            for plan in (newest_two, before):
                assert plan["Actual Rows"] >= PROBED
                assert _index_rows_read(plan) <= 2 * PROBED, (analyzed, json.dumps(plan)[:3000])
