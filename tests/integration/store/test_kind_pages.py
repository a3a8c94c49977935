"""Paging through the cards of the log reads a page of the (kind, idx) index, not every card after it.

The scope runner's card sweep (``ScopeStore.cards_since``) asked for "kind = ANY(card kinds) AND idx >= $2
ORDER BY idx LIMIT 10000": PostgreSQL fetched every card after the mark and sorted them for each page, so a
sweep catching up on N cards (a new deployment, a takeover from an old mark) sorted O(N^2 / 10,000) rows.
The agent directory had the same plan and was fixed on 2026-12-06 (session 28); both now read
``store.log.kinds_since``: one kind at a time from its index, bitmap scans and sorts off.
"""

from __future__ import annotations

import json
from typing import Any

import asyncpg
import msgspec
import pytest

from tests.integration.store.test_card_lookups import _index_rows_read
from trustscore.cli.agent import card_envelope
from trustscore.kinds.cards import AGENT_CARD, AGENT_CARD_V2, CARD_PREDICATE_TYPES
from trustscore.ledger import keys
from trustscore.ledger.submission import check, prepare
from trustscore.store import log as store_log
from trustscore.store.log import KIND_PAGE, PAGE_PLAN, LogStore, kinds_since
from trustscore.store.projection_tables import ProjectionStore
from trustscore.store.scope import ScopeStore

CARDS = 1200  # of each kind, interleaved
PAGE = 50
OLD_QUERY = (
    "SELECT subject, kind, idx FROM entries WHERE kind = ANY($1::text[]) AND idx >= $2 ORDER BY idx LIMIT $3"
)


async def _log_cards(pool: asyncpg.Pool, count: int) -> list[tuple[int, str, str]]:
    """``count`` v1 and ``count`` v2 cards, alternating: (index, agent, kind) in log order."""
    signers = [keys.SigningKey.generate() for _ in range(2 * count)]
    envelopes = [
        card_envelope(s, f"agent {i}", non_capabilities=["medical advice"] if i % 2 else None)
        for i, s in enumerate(signers)
    ]
    appended = await LogStore(pool).append(
        [check(prepare(msgspec.to_builtins(e)), lambda _: None) for e in envelopes]
    )
    kinds = [AGENT_CARD_V2.predicate_type if i % 2 else AGENT_CARD.predicate_type for i in range(2 * count)]
    return [(a.index, s.id, k) for a, s, k in zip(appended, signers, kinds, strict=True)]


async def _read(conn: asyncpg.pool.PoolConnectionProxy, query: str, *args: Any) -> int:
    text = await conn.fetchval(f"EXPLAIN (ANALYZE, FORMAT JSON) {query}", *args)
    return _index_rows_read(json.loads(text)[0]["Plan"])


async def test_a_page_reads_a_page_of_each_kind(pool: asyncpg.Pool) -> None:
    cards = await _log_cards(pool, CARDS)
    start = cards[0][0]
    async with pool.acquire() as conn:
        for analyzed in (False, True):  # statistics behind the log, then up to date
            if analyzed:
                await conn.execute("ANALYZE entries")
            async with conn.transaction():
                await conn.execute(PAGE_PLAN)
                for kind in CARD_PREDICATE_TYPES:
                    read = await _read(conn, KIND_PAGE.format(", leaf"), kind, start, PAGE)
                    assert read <= PAGE + 2, (analyzed, kind, read)
            # What the sweep asked before: every card after the mark, read and sorted for one page.
            if not analyzed:
                old = await _read(conn, OLD_QUERY, list(CARD_PREDICATE_TYPES), start, PAGE)
                assert old >= 2 * CARDS, old  # the attack this test pins: it fails on the old query


async def test_paging_by_kinds_misses_no_card(pool: asyncpg.Pool) -> None:
    """Pages of 3 of each kind, from every start, give every card once in log order; a full page of one
    kind stops the page before later cards of the other."""
    cards = await _log_cards(pool, 8)
    more = await LogStore(pool).append(  # a run of v1 cards: the v2 page is short, the v1 one full
        [
            check(
                prepare(msgspec.to_builtins(card_envelope(keys.SigningKey.generate(), "late"))),
                lambda _: None,
            )
            for _ in range(5)
        ]
    )
    every = [i for i, _, _ in cards] + [a.index for a in more]
    for first in range(len(every)):
        start, seen = every[first], []
        while True:
            rows, last = await kinds_since(pool, CARD_PREDICATE_TYPES, start, 3)
            seen += [r["idx"] for r in rows]
            if last is None:
                break
            start = last + 1
        assert seen == every[first:], first
    twice = (*CARD_PREDICATE_TYPES, *CARD_PREDICATE_TYPES)  # a kind named twice is read once
    assert await kinds_since(pool, twice, every[0], 1000) == await kinds_since(
        pool, CARD_PREDICATE_TYPES, every[0], 1000
    )
    with pytest.raises(ValueError, match="at least 1"):
        await kinds_since(pool, CARD_PREDICATE_TYPES, 0, 0)


async def test_the_sweep_and_the_directory_read_by_kinds_since(
    pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both card readers page through kinds_since (a regression to a query of their own would read every
    card after the mark again), and the sweep's answer is each agent's newest kind."""
    cards = await _log_cards(pool, 6)
    key = keys.SigningKey.generate()
    envelope = card_envelope(key, "renamed", non_capabilities=["legal advice"])  # v2 after ...
    first = card_envelope(key, "first")  # ... a v1 card of the same agent
    [v1, v2] = await LogStore(pool).append(
        [check(prepare(msgspec.to_builtins(e)), lambda _: None) for e in (first, envelope)]
    )
    calls: list[tuple[int, int, bool]] = []
    real = store_log.kinds_since

    async def spied(*args: Any, **kw: Any) -> Any:
        calls.append((args[2], args[3], bool(kw.get("leaf"))))
        return await real(*args, **kw)

    import trustscore.store.projection_tables as projection_tables
    import trustscore.store.scope as scope

    monkeypatch.setattr(scope, "kinds_since", spied)
    monkeypatch.setattr(projection_tables, "kinds_since", spied)
    newest, upto = await ScopeStore(pool).cards_since(cards[0][0], 4)
    assert calls == [(cards[0][0], 4, False)]
    # 4 of each kind, v1 first: the v1 page is full at the 7th card, where this page stops.
    assert upto == cards[6][0] + 1
    assert newest == {agent: kind for _, agent, kind in cards[:7]}
    newest, upto = await ScopeStore(pool).cards_since(cards[0][0])
    assert newest[key.id] == AGENT_CARD_V2.predicate_type and upto == v2.index + 1
    rows, last = await ProjectionStore(pool).agent_names_since(v1.index, 10)
    assert calls[-1] == (v1.index, 10, True)
    assert [(i, a, n) for i, a, n in rows] == [(v1.index, key.id, "first"), (v2.index, key.id, "renamed")]
    assert last is None
