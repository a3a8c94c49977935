"""The agent directory's reads on a real database: callers arriving together share them, and nobody gets
an index older than their question."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import asyncpg
import pytest

from tests.integration.store.test_group_commit import card, checked
from trustscore import canonical
from trustscore.cli.agent import card_envelope
from trustscore.kinds.cards import AGENT_CARD, AgentCard, card_subject
from trustscore.ledger import dsse, keys, statements
from trustscore.services import agent_directory
from trustscore.services.agent_directory import AgentDirectory
from trustscore.store.log import LogStore
from trustscore.store.projection_tables import ProjectionStore


class Counted(ProjectionStore):
    def __init__(self, pool: asyncpg.Pool) -> None:
        super().__init__(pool)
        self.queries = 0

    async def agent_names_since(
        self, start: int, limit: int
    ) -> tuple[list[tuple[int, str, str]], int | None]:
        self.queries += 1
        return await super().agent_names_since(start, limit)


async def _append(pool: asyncpg.Pool, names: list[str]) -> list[str]:
    made = [(keys.SigningKey.generate(), name) for name in names]
    await LogStore(pool).append([card(key, name, secrets.token_hex(16)) for key, name in made])
    return [key.id for key, _ in made]


async def test_callers_arriving_together_share_two_reads(pool: asyncpg.Pool) -> None:
    store = Counted(pool)
    directory = AgentDirectory(store)
    ids = await _append(pool, [f"agent {i}" for i in range(5)])
    await directory.read()
    assert store.queries == 1
    indexes = await asyncio.gather(*(directory.read() for _ in range(50)))
    assert all(index is indexes[0] for index in indexes)
    assert store.queries - 1 <= 2  # one read running, one started after the others asked (not 50)
    assert indexes[0].ids() == sorted(ids)


async def test_a_card_logged_before_a_read_is_asked_for_is_in_its_answer(pool: asyncpg.Pool) -> None:
    """A caller that arrives while a read runs waits for a read started after it asked: a card it has
    just seen logged is in its answer, never an index read before the card was."""
    store = Counted(pool)
    directory = AgentDirectory(store)
    entered, release = asyncio.Event(), asyncio.Event()
    real = store.agent_names_since

    async def slow(start: int, limit: int) -> tuple[list[tuple[int, str, str]], int | None]:
        found = await real(start, limit)
        entered.set()
        await asyncio.wait_for(release.wait(), 30)  # the first read has read the log, not yet fed it
        return found

    store.agent_names_since = slow  # type: ignore[method-assign]
    first = asyncio.create_task(directory.read())
    await asyncio.wait_for(entered.wait(), 30)
    store.agent_names_since = real  # type: ignore[method-assign]
    (late,) = await _append(pool, ["late comer"])
    second = asyncio.create_task(directory.read())
    await asyncio.sleep(0.05)
    release.set()
    await first
    assert late in (await second).agents


@pytest.mark.parametrize("page", [1, 2, 3, 1000])
async def test_a_read_takes_every_page_of_every_card_kind_in_log_order(
    pool: asyncpg.Pool, page: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Cards of both kinds (agent-card v1 and v2) interleaved, renames across kinds: every page size
    gives each agent its newest name and its first card's index."""
    monkeypatch.setattr(agent_directory, "PAGE", page)
    made = [keys.SigningKey.generate() for _ in range(5)]
    log, expected = LogStore(pool), {}
    for round_ in range(3):
        for i, key in enumerate(made):
            name = f"agent {i} round {round_}"
            if (5 * round_ + i) % 4 == 3:  # a v2 card (it declares a non-capability): runs of uneven length
                entry = checked(card_envelope(key, name, non_capabilities=["payments"]))
            else:
                entry = card(key, name, secrets.token_hex(16))
            await log.append([entry])
            expected[key.id] = name
        if round_ == 0:
            first = AgentDirectory(ProjectionStore(pool))
            assert (await first.read()).ids() == sorted(expected)
    for directory in (first, AgentDirectory(ProjectionStore(pool))):  # read on, and read from the start
        index = await directory.read()
        assert index.ids() == sorted(expected)
        assert {a: n.name for a, n in index.agents.items()} == expected
        assert sorted(n.first for n in index.agents.values()) == list(range(5))


class _Between:
    """A pool whose next connection runs ``hook`` before its second query (between the v1 and the v2 page)."""

    def __init__(self, pool: asyncpg.Pool) -> None:
        self.pool = pool
        self.hook: Callable[[], Awaitable[None]] | None = None

    @contextlib.asynccontextmanager
    async def acquire(self) -> AsyncIterator[Any]:
        hook, self.hook = self.hook, None
        async with self.pool.acquire() as conn:
            yield _HookedConnection(conn, hook)


class _HookedConnection:
    def __init__(self, conn: Any, hook: Callable[[], Awaitable[None]] | None) -> None:
        self.conn, self.hook, self.fetches = conn, hook, 0

    def transaction(self, **options: Any) -> Any:
        return self.conn.transaction(**options)

    async def execute(self, *args: Any) -> Any:
        return await self.conn.execute(*args)

    async def fetch(self, *args: Any) -> Any:
        self.fetches += 1
        if self.fetches == 2 and self.hook is not None:
            await self.hook()
        return await self.conn.fetch(*args)


async def test_cards_committed_between_the_pages_of_two_kinds_are_not_skipped(pool: asyncpg.Pool) -> None:
    """review: each kind's page saw the log at its own moment (READ COMMITTED). A v1 card and then a v2
    card committed between the two: the v2 page had the later card, the v1 page not the earlier one, and
    the read went on after both: the v1 card's agent was missing from every list until a restart."""
    log = LogStore(pool)
    (first,) = await _append(pool, ["first"])
    between = _Between(pool)
    directory = AgentDirectory(ProjectionStore(between))  # type: ignore[arg-type]
    assert (await directory.read()).ids() == [first]
    a, b = keys.SigningKey.generate(), keys.SigningKey.generate()

    async def register_two() -> None:  # in log order: a v1 card, then a v2 card
        await log.append([card(a, "alpha v1", secrets.token_hex(16))])
        await log.append([checked(card_envelope(b, "beta v2", non_capabilities=["payments"]))])

    between.hook = register_two
    await directory.read()  # the racing read: it may see both cards or neither, never the later alone
    index = await directory.read()
    assert index.ids() == sorted([first, a.id, b.id])
    assert {n.name for n in index.agents.values()} == {"first", "alpha v1", "beta v2"}


async def test_a_card_admitted_with_a_repeated_predicate_key_is_named_as_before(pool: asyncpg.Pool) -> None:
    """review: a payload repeating ``predicate`` (refused at intake only since 2026-12-03, so it can be in
    an older log) failed the light name decoder at every read, and every agent list answered 500."""
    (good,) = await _append(pool, ["good"])
    key = keys.SigningKey.generate()
    predicate = AgentCard(
        nonce=secrets.token_hex(16),
        issued_at="2026-11-30T00:00:00Z",
        public_key=canonical.b64encode(key.public_key),
        name="legacy",
    )
    payload = statements.make_statement(AGENT_CARD, card_subject(key.public_key), predicate)
    payload = payload.replace(b'"predicate":', b'"predicate":null,"predicate":')
    await LogStore(pool).append([checked(dsse.sign(payload, [key]))])  # the checks of an older log
    index = await AgentDirectory(ProjectionStore(pool)).read()
    assert {a: n.name for a, n in index.agents.items()} == {good: "good", key.id: "legacy"}


async def test_a_failed_read_is_not_taken_for_a_finished_one(pool: asyncpg.Pool) -> None:
    store = Counted(pool)
    directory = AgentDirectory(store)
    ids = await _append(pool, ["one", "two"])
    real = store.agent_names_since
    failing = [True]

    async def flaky(start: int, limit: int) -> tuple[list[tuple[int, str, str]], int | None]:
        if failing[0]:
            failing[0] = False
            raise ConnectionError("the database went away")
        return await real(start, limit)

    store.agent_names_since = flaky  # type: ignore[method-assign]
    results = await asyncio.gather(*(directory.read() for _ in range(5)), return_exceptions=True)
    assert isinstance(results[0], ConnectionError)
    assert all(not isinstance(r, BaseException) and r.ids() == sorted(ids) for r in results[1:]), results
    assert (await directory.read()).ids() == sorted(ids)


async def test_a_caller_behind_a_failed_read_reads_again(pool: asyncpg.Pool) -> None:
    """Callers that asked while a read ran wait for one started after; if that one fails, the next caller
    reads again rather than take the failed read for a finished one (and answer without the new card)."""
    store = Counted(pool)
    directory = AgentDirectory(store)
    real = store.agent_names_since
    entered, release = asyncio.Event(), asyncio.Event()
    calls = [0]

    async def scripted(start: int, limit: int) -> tuple[list[tuple[int, str, str]], int | None]:
        calls[0] += 1
        if calls[0] == 2:  # the read started for the callers behind the first fails
            raise ConnectionError("the database went away")
        found = await real(start, limit)
        if calls[0] == 1:  # the first read has read the log and is held open before it feeds it
            entered.set()
            await asyncio.wait_for(release.wait(), 30)
        return found

    store.agent_names_since = scripted  # type: ignore[method-assign]
    first = asyncio.create_task(directory.read())
    await asyncio.wait_for(entered.wait(), 30)
    (late,) = await _append(pool, ["late comer"])
    behind = [asyncio.create_task(directory.read()) for _ in range(2)]
    await asyncio.sleep(0.05)
    release.set()
    await first
    results = await asyncio.gather(*behind, return_exceptions=True)
    assert isinstance(results[0], ConnectionError)
    assert not isinstance(results[1], BaseException) and late in results[1].agents, results


async def test_the_warm_up_gives_up_between_pages_once_stopped(
    pool: asyncpg.Pool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A shutdown does not wait for a first read of every card (review): the read stops after the page
    in hand, and the next read goes on from there."""
    monkeypatch.setattr(agent_directory, "PAGE", 2)
    store = Counted(pool)
    directory = AgentDirectory(store)
    ids = await _append(pool, [f"agent {i}" for i in range(5)])
    stop = asyncio.Event()
    stop.set()
    await directory.warm(stop)
    assert store.queries == 1 and len(directory._index.agents) == 2
    index = await directory.read()  # (not stopped) every card, from where the warm-up stopped
    assert set(ids) <= index.agents.keys() and store.queries == 1 + 2  # pages of 2 and 1


async def test_the_warm_up_sorts_the_ids(pool: asyncpg.Pool) -> None:
    directory = AgentDirectory(Counted(pool))
    ids = await _append(pool, [f"agent {i}" for i in range(3)])
    await directory.warm(asyncio.Event())
    assert not directory._index._new and set(ids) <= set(directory._index._sorted)
