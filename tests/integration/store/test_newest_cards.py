"""The scope runner's lookup of named agents' two newest cards answers what the query over every card does."""

from __future__ import annotations

import asyncpg
import msgspec

from trustscore.cli.agent import card_envelope
from trustscore.ledger import keys
from trustscore.ledger.submission import check, prepare
from trustscore.store.log import LogStore
from trustscore.store.scope import ScopeStore


async def test_named_agents_get_what_the_scan_of_every_card_gives(pool: asyncpg.Pool) -> None:
    signers = [keys.SigningKey.generate() for _ in range(4)]
    known: dict[str, bytes] = {}
    order = [0, 1, 0, 2, 0, 2, 3, 0]  # three, four, one and two cards, interleaved
    for n, who in enumerate(order):
        card = check(prepare(msgspec.to_builtins(card_envelope(signers[who], f"v{n}"))), known.get)
        known[card.signer] = bytes(signers[who].public_key)
        await LogStore(pool).append([card])
    store = ScopeStore(pool)
    everyone = await store.newest_cards(None)
    ids = [s.id for s in signers]
    assert sorted(everyone) == sorted(ids)
    assert [len(everyone[i]) for i in ids] == [2, 1, 2, 1]
    asked = [ids[2], ids[0], "ts1_" + "0" * 40, ids[0], ids[3]]  # unsorted, repeated, unknown
    assert await store.newest_cards(asked) == {i: everyone[i] for i in (ids[0], ids[2], ids[3])}
    assert await store.newest_cards([]) == {}
    newest, previous = everyone[ids[0]]
    assert newest[0] == 7 and previous[0] == 4  # newest first


async def test_the_scan_and_the_lookup_agree_below_an_index_and_for_one_card(pool: asyncpg.Pool) -> None:
    """The sweep compares an agent's newest card with its newest card below the page it sweeps, and the
    weekly scheduling reads only each agent's newest card: both arguments, on both paths."""
    signers = [keys.SigningKey.generate() for _ in range(3)]
    known: dict[str, bytes] = {}
    for n, who in enumerate([0, 1, 0, 2, 0, 2, 0]):
        card = check(prepare(msgspec.to_builtins(card_envelope(signers[who], f"v{n}"))), known.get)
        known[card.signer] = bytes(signers[who].public_key)
        await LogStore(pool).append([card])
    store = ScopeStore(pool)
    ids = [s.id for s in signers]
    below = await store.newest_cards(None, 5, 1)
    assert {k: [i for i, _ in v] for k, v in below.items()} == {ids[0]: [4], ids[1]: [1], ids[2]: [3]}
    assert await store.newest_cards(ids, 5, 1) == below
    newest = await store.newest_cards(None, count=1)
    assert {k: [i for i, _ in v] for k, v in newest.items()} == {ids[0]: [6], ids[1]: [1], ids[2]: [5]}
    assert await store.newest_cards(ids, None, 1) == newest
    assert await store.newest_cards(None, 0, 1) == {}
