"""Appends that queue up are committed together: first all at once, and one group at a time when any of
them fails. Either way the result must be what appending the groups one by one would give."""

from __future__ import annotations

import msgspec
import pytest

from tests.helpers import new_card
from trustscore import canonical
from trustscore.cli.agent import card_envelope
from trustscore.errors import InvalidInput, NonceReplay
from trustscore.kinds.admission import registration_of
from trustscore.kinds.cards import AGENT_CARD, AgentCard, card_subject
from trustscore.kinds.parties import make_party_card
from trustscore.kinds.service_card import make_service_card
from trustscore.ledger import dsse, keys, statements
from trustscore.ledger.submission import CheckedEntry, check, prepare
from trustscore.store.log import Appended, LogStore


def checked(env: dsse.Envelope) -> CheckedEntry:
    return check(prepare(msgspec.to_builtins(env)), lambda _k: None)


def card(key: keys.SigningKey, name: str, nonce: str) -> CheckedEntry:
    predicate = AgentCard(
        nonce=nonce,
        issued_at="2026-11-30T00:00:00Z",
        public_key=canonical.b64encode(key.public_key),
        name=name,
    )
    payload = statements.make_statement(AGENT_CARD, card_subject(key.public_key), predicate)
    return checked(dsse.sign(payload, [key]))


def indexes(result: list[Appended] | Exception) -> list[tuple[int, bool]]:
    assert not isinstance(result, Exception), result
    return [(a.index, a.duplicate) for a in result]


async def test_groups_that_all_succeed_are_written_together(store: LogStore) -> None:
    a, b, c = (checked(new_card(n)[1]) for n in "abc")
    start = await store.sequenced_size()
    results = await store.append_groups([([a], None), ([b, c], None), ([a], None)])
    assert indexes(results[0]) == [(start, False)]
    assert indexes(results[1]) == [(start + 1, False), (start + 2, False)]
    assert indexes(results[2]) == [(start, True)]  # the same statement as the first group's
    assert await store.sequenced_size() == start + 3
    assert [e.leaf for e in await store.entries(start, start + 3)] == [a.leaf, b.leaf, c.leaf]


async def test_a_failing_group_fails_alone_and_leaves_no_gap(store: LogStore) -> None:
    key = keys.SigningKey.generate()
    await store.append([card(key, "first", "n" * 32)])
    replay = card(key, "renamed", "n" * 32)  # a new statement with a used nonce
    a, b = checked(new_card("a")[1]), checked(new_card("b")[1])
    start = await store.sequenced_size()
    results = await store.append_groups([([a], None), ([replay], None), ([b], None)])
    assert indexes(results[0]) == [(start, False)]
    assert isinstance(results[1], NonceReplay) and "already used" in str(results[1])
    assert indexes(results[2]) == [(start + 1, False)]
    assert await store.sequenced_size() == start + 2


async def test_a_key_registered_twice_differently_in_one_commit_is_refused(store: LogStore) -> None:
    """Admission of each request ran before the other was written; under the sequence lock the second
    card may not give the same key another type."""
    key = keys.SigningKey.generate()
    as_agent = checked(card_envelope(key, "agent"))
    as_party = checked(dsse.sign(make_party_card(key.public_key, "party", "counterparty"), [key]))
    start = await store.sequenced_size()
    results = await store.append_groups([([as_agent], None), ([as_party], None)])
    assert indexes(results[0]) == [(start, False)]
    assert isinstance(results[1], InvalidInput) and "registered as agent" in str(results[1])
    # Within one group too (one request carrying both cards).
    other = keys.SigningKey.generate()
    with pytest.raises(InvalidInput, match="registered twice in one commit"):
        await store.append(
            [
                checked(card_envelope(other, "agent")),
                checked(dsse.sign(make_party_card(other.public_key, "party", "counterparty"), [other])),
            ]
        )
    assert await store.sequenced_size() == start + 1


async def test_keys_are_written_as_new_and_checked_only_when_they_are_not(store: LogStore) -> None:
    """Keys rows go in as if new; a key already registered (a card update, or a card that raced past
    admission) is compared with its registration instead."""
    key = keys.SigningKey.generate()
    [first] = await store.append([card(key, "v1", "a" * 32)])
    [update] = await store.append([card(key, "v2", "b" * 32)])
    assert update.index == first.index + 1 and not update.duplicate
    assert await store.key_entry(key.id) == (key.public_key, first.index)  # the first card's index
    # A party card for the same key, as if admission had read the registrations before the agent card.
    with pytest.raises(InvalidInput, match="registered as agent"):
        await store.append([checked(dsse.sign(make_party_card(key.public_key, "p", "counterparty"), [key]))])
    # A batch mixing an update with a new key: the new key is registered, the update changes nothing.
    other = keys.SigningKey.generate()
    out = await store.append([card(key, "v3", "c" * 32), card(other, "o", "d" * 32)])
    assert await store.key_entry(other.id) == (other.public_key, out[1].index)
    assert await store.key_entry(key.id) == (key.public_key, first.index)


async def test_a_resubmitted_batch_gets_its_indexes_back(store: LogStore) -> None:
    batch = [checked(new_card(n)[1]) for n in "xyz"]
    first = await store.append(batch)
    size = await store.sequenced_size()
    again = await store.append([checked(new_card("w")[1]), *batch])  # one new statement, three old
    assert [(a.index, a.duplicate) for a in again[1:]] == [(a.index, True) for a in first]
    assert again[0].index == size and not again[0].duplicate
    assert await store.sequenced_size() == size + 1


async def test_a_replay_beside_its_resubmitted_original_is_named_by_its_own_position(store: LogStore) -> None:
    """[replay, original] where the original is already logged: the original is a harmless
    resubmission; the replay is the new statement reusing its nonce, at position 0."""
    key = keys.SigningKey.generate()
    original = card(key, "first", "n" * 32)
    await store.append([original])
    replay = card(key, "renamed", "n" * 32)
    for batch, pos in (([replay, original], 0), ([original, replay], 1)):
        with pytest.raises(NonceReplay, match=rf"entries\[{pos}\]: nonce .* was already used"):
            await store.append(batch)
    # Within one batch and with nothing logged, two statements with one nonce are "used twice".
    other = keys.SigningKey.generate()
    with pytest.raises(NonceReplay, match=r"entries\[1\]: nonce .* is used twice"):
        await store.append([card(other, "a", "m" * 32), card(other, "b", "m" * 32)])


async def test_registrations_read_back_as_written(store: LogStore) -> None:
    """Keys are written by one statement (roles passed as JSON arrays): what admission reads back is the
    registration each card makes, roles and controller included, for several keys in one commit."""
    service, agent, party = (keys.SigningKey.generate() for _ in range(3))
    entries = [
        checked(dsse.sign(make_service_card(service.public_key, "s", ["reverify", "grader"]), [service])),
        checked(card_envelope(agent, "agent")),
        checked(dsse.sign(make_party_card(party.public_key, "p", "counterparty"), [party])),
    ]
    out = await store.append(entries)
    got = await store.registrations([service.id, agent.id, party.id])
    for entry, appended in zip(entries, out, strict=True):
        want = registration_of(entry.statement)
        assert want is not None and got[want.id] == want
        assert await store.key_entry(want.id) == (want.public_key, appended.index)
    assert got[service.id].roles == ("grader", "reverify")


async def test_many_keys_with_one_registered_already(store: LogStore) -> None:
    """More than 256 keys in one commit are written by a COPY, which a key registered already fails whole:
    then that key is compared, and the others written, as with few keys."""
    known = keys.SigningKey.generate()
    [first] = await store.append([card(known, "v1", "k" * 32)])
    many = [keys.SigningKey.generate() for _ in range(300)]
    update = card(known, "v2", "u" * 32)
    out = await store.append([*(card(k, "n", f"{i:032d}") for i, k in enumerate(many)), update])
    assert await store.key_entry(known.id) == (known.public_key, first.index)
    for k, appended in zip(many, out, strict=False):
        assert await store.key_entry(k.id) == (k.public_key, appended.index)
    # The same with a key that may not change: nothing of the batch is written.
    size = await store.sequenced_size()
    others = [keys.SigningKey.generate() for _ in range(300)]
    party = checked(dsse.sign(make_party_card(known.public_key, "p", "counterparty"), [known]))
    with pytest.raises(InvalidInput, match="registered as agent"):
        await store.append([*(card(k, "n", f"{i:032d}") for i, k in enumerate(others)), party])
    assert await store.sequenced_size() == size
    assert await store.key_entry(others[0].id) is None
