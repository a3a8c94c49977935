"""Single-entry appends arriving together share their lookups and their commit, yet each request is
answered as if it had been alone: its own index, a resubmission its first index, a bad signature its
own refusal, and nothing another request did leaks into its answer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Sequence

import msgspec
import pytest

from tests.helpers import new_card
from trustscore.errors import SignatureError
from trustscore.kinds.admission import Registration
from trustscore.ledger import keys
from trustscore.services.log import LogService
from trustscore.store import db
from trustscore.store.log import Appended, LogStore


class CountingStore(LogStore):
    """The real store, counting the lookups made before appending."""

    lookups = 0
    registration_lookups = 0

    async def registrations(self, ids: Iterable[str]) -> dict[str, Registration]:
        self.lookups += 1
        self.registration_lookups += 1
        return await super().registrations(ids)

    async def existing(self, statement_hashes: Sequence[bytes]) -> dict[bytes, Appended]:
        self.lookups += 1
        return await super().existing(statement_hashes)


@pytest.fixture
async def service(dsn: str) -> AsyncIterator[LogService]:
    await db.migrate(dsn)
    pool = await db.create_pool(dsn, min_size=1, max_size=4)
    yield LogService(CountingStore(pool), keys.SigningKey.generate(), "test.example/log", max_batch=100)
    await pool.close()


def body(env: object) -> bytes:
    return msgspec.json.encode(env)


async def test_concurrent_single_entries_are_answered_each_on_its_own(service: LogService) -> None:
    bodies = [body(new_card(f"agent{i}")[1]) for i in range(40)]
    forged = msgspec.json.decode(bodies[3])
    forged["signatures"][0]["sig"] = msgspec.json.decode(bodies[4])["signatures"][0]["sig"]
    sent = [*bodies, bodies[7], body(forged), bodies[7]]  # one statement three times, one forgery
    results = await asyncio.gather(*(service.submit(b) for b in sent), return_exceptions=True)

    assert isinstance(results[41], SignatureError)
    answered = [r for r in results if not isinstance(r, BaseException)]
    assert len(answered) == 42 and all(len(r) == 1 for r in answered)
    first = {i: r[0] for i, r in enumerate(results) if not isinstance(r, BaseException)}
    new = [first[i] for i in range(40)] + [first[40], first[42]]
    assert sorted(a.index for a in new if not a.duplicate) == list(range(40))  # contiguous, each once
    assert {first[7].index, first[40].index, first[42].index} == {first[7].index}  # one entry
    assert sum(a.duplicate for a in (first[7], first[40], first[42])) == 2
    stored = await service.store.entries(0, 40)
    assert {e.leaf_hash for e in stored} == {a.leaf_hash for a in new}
    # 43 requests, two lookups each if asked one by one: shared lookups make far fewer queries.
    store = service.store
    assert isinstance(store, CountingStore)
    assert store.lookups < 43


async def test_a_registration_once_found_is_not_looked_up_again(service: LogService) -> None:
    """Registrations never change once made, so a signer seen registered costs no lookup again."""
    from trustscore.cli.agent import card_envelope

    store = service.store
    assert isinstance(store, CountingStore)
    key = keys.SigningKey.generate()
    for name in ("first", "second"):  # the first is not registered yet; the second finds it
        [appended] = await service.submit(body(card_envelope(key, name)))
        assert not appended.duplicate
    before = store.registration_lookups
    [appended] = await service.submit(body(card_envelope(key, "third")))
    assert not appended.duplicate
    assert store.registration_lookups == before
