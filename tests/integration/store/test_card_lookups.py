"""The lookups of an agent's newest cards read that agent's newest cards, not every card of the log, nor
every version of the agent's own card.

They filter entries by subject and by kind. With only an index on (subject, idx) beside one on (kind, idx),
PostgreSQL's planner, its statistics behind a log that grew fast, intersected both indexes: every lookup
read the whole kind index of agent cards (1.3 ms an agent at 30,000 cards, O(cards) per new card: most of
PostgreSQL's time during card ingest, bench/README.md). One index on (subject, kind, idx) serves them, but
"kind = ANY(...)" on its middle column cannot be read in idx order: an agent with many card versions had
all of them read and sorted (review: 57 ms at 18,000). So each kind is probed apart, newest first
(``store.log.newest_of_kinds``).
"""

from __future__ import annotations

import json
from typing import Any

import asyncpg
import msgspec

from tests.integration.store.test_group_commit import card
from trustscore.cli.agent import card_envelope
from trustscore.kinds.cards import CARD_PREDICATE_TYPES
from trustscore.ledger import keys
from trustscore.ledger.submission import check, prepare
from trustscore.store.log import NEWEST_OF_KINDS, LogStore, newest_of_kinds

CARDS = 1500
PROBED = 20
VERSIONS = 2000


def _index_rows_read(plan: dict[str, Any]) -> int:
    """Rows the plan's scans of tables and indexes produced or filtered out, over all their loops."""
    own = 0
    if plan["Node Type"].endswith("Scan") and plan["Node Type"] != "Function Scan":
        kept_and_dropped = plan.get("Actual Rows", 0) + plan.get("Rows Removed by Filter", 0)
        own = kept_and_dropped * plan.get("Actual Loops", 1)
    return own + sum(_index_rows_read(p) for p in plan.get("Plans", []))


async def _rows_read(conn: asyncpg.pool.PoolConnectionProxy, *args: object) -> int:
    text = await conn.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) {NEWEST_OF_KINDS}", *args)
    plan: dict[str, Any] = json.loads(text)[0]["Plan"]
    return _index_rows_read(plan)


async def test_card_lookups_read_the_agents_newest_cards(pool: asyncpg.Pool) -> None:
    signers = [keys.SigningKey.generate() for _ in range(CARDS)]
    cards = [check(prepare(msgspec.to_builtins(card_envelope(s, "v1"))), lambda _: None) for s in signers]
    store = LogStore(pool)
    first = await store.append(cards)
    busy = keys.SigningKey.generate()  # one agent with many versions of its card
    versions = await store.append([card(busy, f"v{i}", f"{i:032d}") for i in range(VERSIONS)])
    probed = sorted(s.id for s in signers[-PROBED:])
    kinds = list(CARD_PREDICATE_TYPES)
    middle = versions[VERSIONS // 2].index
    async with pool.acquire() as conn:
        for analyzed in (False, True):  # statistics behind the log, then up to date
            if analyzed:
                await conn.execute("ANALYZE entries")
            for count, before in ((2, None), (1, versions[-1].index + 1)):
                read = await _rows_read(conn, probed, kinds, before, count)
                assert read <= 2 * PROBED, (analyzed, count, read)  # not the log's 3,500 cards each
            # Below a bound (the webhook projection's lookups), the busy agent's newest versions only.
            for before in (versions[-1].index + 1, middle):
                assert await _rows_read(conn, [busy.id], kinds, before, 1) <= 4, (analyzed, before)
            # Without one, the planner may still read and sort every version of the agent's own card
            # (an Append over the partitions, the empty one ahead scanned as a heap): bounded by its own
            # cards, never the log's (docs/operations.md, "Upgrading to migration 0021").
            assert await _rows_read(conn, [busy.id], kinds, None, 2) <= VERSIONS + 4
        # Under a generic plan (a cached statement may get one after five runs) a lookup below a bound
        # reads none of the subject's entries at or above it (review: with "$3 IS NULL OR idx < $3" the
        # bound was a filter, and a lookup below the middle read all 2,000 versions). A generic plan still
        # reads every version below the bound (partitions are pruned only at run time): a limit.
        await conn.execute("SET plan_cache_mode = force_generic_plan")
        await conn.execute(f"PREPARE newest(text[], text[], bigint, int) AS {NEWEST_OF_KINDS}")
        try:
            args = f"ARRAY['{busy.id}'], ARRAY[{', '.join(repr(k) for k in kinds)}], {middle}, 1"
            text = await conn.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE newest({args})")
            assert _index_rows_read(json.loads(text)[0]["Plan"]) <= VERSIONS // 2
        finally:
            await conn.execute("DEALLOCATE newest")
            await conn.execute("RESET plan_cache_mode")
    # And what they answer: newest first, below ``before`` when given, unknown subjects left out.
    got = await newest_of_kinds(pool, [busy.id, signers[0].id, "ts1_" + "0" * 40], kinds, 2)
    assert [i for i, _ in got[busy.id]] == [versions[-1].index, versions[-2].index]
    assert [i for i, _ in got[signers[0].id]] == [first[0].index] and len(got) == 2
    below = await newest_of_kinds(pool, [busy.id], kinds, 1, before=middle)
    assert [i for i, _ in below[busy.id]] == [middle - 1]
    [newest] = await store.entries(versions[-1].index, versions[-1].index + 1)
    assert got[busy.id][0][1] == newest.leaf
