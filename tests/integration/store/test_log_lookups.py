"""The report's two pre-grading questions in one round trip answer exactly what the two lookups do."""

from __future__ import annotations

import itertools

import asyncpg
import msgspec

from trustscore.cli.agent import card_envelope
from trustscore.ledger import keys
from trustscore.ledger.submission import check, prepare
from trustscore.store.log import LogStore


async def test_the_combined_lookup_equals_entry_by_nonce_and_nonce_used(pool: asyncpg.Pool) -> None:
    store = LogStore(pool)
    known: dict[str, bytes] = {}  # a card introduces its own key
    cards = [
        check(prepare(msgspec.to_builtins(card_envelope(keys.SigningKey.generate(), f"a{i}"))), known.get)
        for i in range(3)
    ]
    await store.append(cards)
    pairs = [(e.signer, e.nonce) for e in cards]
    pairs += [(cards[0].signer, "no such nonce"), ("ts1_" + "0" * 40, cards[1].nonce)]
    for (signer, nonce), (other, other_nonce) in itertools.product(pairs, repeat=2):
        got = await store.entry_by_nonce_and_nonce_used(signer, nonce, other, other_nonce)
        expected = (await store.entry_by_nonce(signer, nonce), await store.nonce_used(other, other_nonce))
        assert got == expected
    found, used = await store.entry_by_nonce_and_nonce_used(*pairs[2], *pairs[3])
    assert found is not None and found.index == 2 and used is False


async def test_many_probes_in_one_round_trip_answer_as_each_alone(pool: asyncpg.Pool) -> None:
    """LogStore.nonce_probes (reports arriving together): each probe's answer is its own, in any order,
    a probe asked twice included."""
    store = LogStore(pool)
    known: dict[str, bytes] = {}
    cards = [
        check(prepare(msgspec.to_builtins(card_envelope(keys.SigningKey.generate(), f"b{i}"))), known.get)
        for i in range(3)
    ]
    await store.append(cards)
    pairs = [(e.signer, e.nonce) for e in cards] + [(cards[0].signer, "no such nonce")]
    probes = [(*a, *b) for a, b in itertools.product(pairs, repeat=2)]
    alone = {}
    for p in probes:
        found = await store.entry_by_nonce(*p[:2])
        alone[p] = (None if found is None else found.index, await store.nonce_used(*p[2:]))
    assert await store.nonce_probes([]) == {}
    for batch in (probes, probes[::-1], probes[:3] + probes[:3]):
        assert await store.nonce_probes(batch) == {p: alone[p] for p in batch}
