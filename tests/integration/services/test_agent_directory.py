"""The agent directory's reads on a real database: callers arriving together share them, and nobody gets
an index older than their question."""

from __future__ import annotations

import asyncio
import secrets

import asyncpg
import pytest

from tests.integration.store.test_group_commit import card, checked
from trustscore.cli.agent import card_envelope
from trustscore.ledger import keys
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
