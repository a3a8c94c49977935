"""One kept index of the registered agents serves every read that lists or names them.

Before 2026-12-06 the home page's names, the agent search, the look-alike warnings and the agent list
each kept an index of their own and read every agent card for it: a process parsed each card up to four
times (~17 us each on this VM, so a first visit of each page after a start cost seconds at 10^5 agents)
and held four copies of the names. Now each card is parsed once per process."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import msgspec
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from tests.helpers import new_card
from trustscore.api.wiring import STATE_KEY
from trustscore.cli.agent import card_envelope
from trustscore.ledger import dsse, keys
from trustscore.names import NameOrder
from trustscore.store.projection_tables import ProjectionStore

Client = AsyncTestClient[Litestar]
AGENTS = 30


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """[queries, cards parsed] by ProjectionStore.agent_names_since (what builds a name index)."""
    counts = [0, 0]
    real = ProjectionStore.agent_names_since

    async def counted(self: ProjectionStore, *args: Any) -> Any:
        found = await real(self, *args)
        counts[0] += 1
        counts[1] += len(found[0] if isinstance(found, tuple) else found)  # (rows, last); before: rows
        return found

    monkeypatch.setattr(ProjectionStore, "agent_names_since", counted)
    return counts


Cards = dict[str, tuple[keys.SigningKey, dsse.Envelope]]


async def _register(client: Client, count: int, prefix: str, cards: Cards | None = None) -> list[str]:
    made = [new_card(f"{prefix} {i}") for i in range(count)]
    body = b"[" + b",".join(msgspec.json.encode(card) for _, card in made) + b"]"
    r = await client.post("/v1/log/entries", content=body)
    assert r.status_code in (200, 201), r.text
    ids = sorted(key.id for key, _ in made)
    if cards is not None:
        cards.update((key.id, (key, card)) for key, card in made)
    for _ in range(400):  # projected: the last card is readable (its route reads it, not the index)
        if (await client.get(f"/v1/agents/{ids[-1]}")).status_code == 200:
            return ids
        await asyncio.sleep(0.05)
    raise AssertionError("the cards were not projected")


async def test_every_reader_of_the_agents_parses_each_card_once(client: Client, parsed: list[int]) -> None:
    cards: Cards = {}
    ids = await _register(client, AGENTS, "directory", cards)
    reads: list[tuple[str, dict[str, Any]]] = [
        ("/", {}),
        ("/", {"q": "directory 1"}),
        ("/leaderboard", {}),
        ("/v1/leaderboard", {"limit": 1000}),
        ("/v1/agents", {"limit": 1000}),
        ("/v1/search/agents", {"q": "directory"}),
        (f"/v1/agents/{ids[0]}", {}),  # its look-alike warnings
    ]
    for path, params in reads:
        r = await client.get(path, params=params)
        assert r.status_code == 200, (path, r.text[:500])
    assert parsed[1] == AGENTS, parsed  # before: 3 x AGENTS (each index read every card)
    listed = (await client.get("/v1/agents", params={"limit": 1000})).json()["agents"]
    assert [a["id"] for a in listed] == ids
    found = (await client.get("/v1/search/agents", params={"q": "directory 7"})).json()
    assert any(f["name"] == "directory 7" for f in found["agents"]), found

    # A new agent and a rename reach every reader from the one index, each new card parsed once.
    before = parsed[1]
    extra = await _register(client, 1, "late")
    key, _ = cards[ids[0]]
    r = await client.post("/v1/log/entries", content=msgspec.json.encode(card_envelope(key, "Renamed Agent")))
    assert r.status_code in (200, 201), r.text
    for _ in range(400):
        search = (await client.get("/v1/search/agents", params={"q": "renamed agent"})).json()
        if search["agents"]:
            break
        await asyncio.sleep(0.05)
    assert [f["id"] for f in search["agents"]] == [ids[0]], search
    late = (await client.get("/v1/search/agents", params={"q": "late 0"})).json()
    assert [f["id"] for f in late["agents"]] == extra, late
    home = await client.get("/", params={"q": "renamed"})
    assert home.status_code == 200 and ids[0] in home.text, home.text[:2000]
    assert parsed[1] - before == 2, parsed


async def test_each_page_reads_the_directory_once(client: Client, parsed: list[int]) -> None:
    """The home page needs names, a search and the leaderboard; the leaderboard page the board and names.
    Each used to bring the directory up to date on its own (a read is a 5-round-trip transaction even
    when nothing changed): three reads for one home page, two for the leaderboard page."""
    await _register(client, 3, "once")
    for path, params in [("/", {}), ("/", {"q": "once"}), ("/leaderboard", {}), ("/leaderboard", {})]:
        before = parsed[0]
        r = await client.get(path, params=params)
        assert r.status_code == 200, (path, r.text[:500])
        assert (params == {} and path == "/") or "once 1" in r.text, (path, params)  # a name on the page
        assert parsed[0] - before == 1, (path, params, parsed[0] - before)


async def test_a_bad_leaderboard_query_is_refused_before_the_directory_is_read(
    client: Client, parsed: list[int]
) -> None:
    """The leaderboard page read the directory, then the board checked its model and dimension: a bad
    query cost a read (a 5-round-trip transaction), and a storage error would come back where a 400 does."""
    await _register(client, 1, "early")
    for params in ({"dimension": "charm"}, {"model": "no-such-model"}, {"dimension": ""}):
        before = parsed[0]
        r = await client.get("/leaderboard", params=params)
        assert r.status_code in (400, 404), (params, r.status_code, r.text[:300])
        assert parsed[0] == before, params


async def test_the_search_orders_names_in_a_thread_and_answers_as_before(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past ``reorder`` agents registered or renamed since its name order was made, the search makes the
    order again off the event loop (one making shared by the searches arriving meanwhile) and answers the
    same; below it, the agents since are scanned one by one."""
    search = client.app.state[STATE_KEY].public.search
    search.reorder = 5
    made: list[int] = []
    real = NameOrder.of

    def counted(agents: Any) -> NameOrder:
        made.append(threading.get_ident())
        return real(agents)

    monkeypatch.setattr(NameOrder, "of", counted)
    cards: Cards = {}
    ids = await _register(client, 12, "ordered", cards)
    answers = await asyncio.gather(
        *(
            client.get("/v1/search/agents", params={"q": q, "limit": 50})
            for q in ("ordered", "ts1", "ordered 1")
        )
    )
    assert len(made) == 1 and made[0] != threading.get_ident(), made  # one making, in another thread
    by_name = sorted(f"ordered {i}" for i in range(12))  # "ordered 0", "ordered 1", "ordered 10", ...
    assert [f["name"] for f in answers[0].json()["agents"]] == by_name
    assert sorted(f["id"] for f in answers[1].json()["agents"]) == ids  # every id starts with ts1
    assert [f["name"] for f in answers[2].json()["agents"]] == ["ordered 1", "ordered 10", "ordered 11"]
    assert [f["exact"] for f in answers[2].json()["agents"]] == [True, False, False]
    # Renamed and new agents since the order: scanned, never found under their old name.
    key, _ = cards[ids[0]]
    r = await client.post("/v1/log/entries", content=msgspec.json.encode(card_envelope(key, "Moved Away")))
    assert r.status_code in (200, 201), r.text
    for _ in range(400):
        moved = (await client.get("/v1/search/agents", params={"q": "moved away"})).json()["agents"]
        if moved:
            break
        await asyncio.sleep(0.05)
    assert [(f["id"], f["exact"]) for f in moved] == [(ids[0], True)]
    left = (await client.get("/v1/search/agents", params={"q": "ordered", "limit": 50})).json()["agents"]
    assert ids[0] not in [f["id"] for f in left] and len(left) == 11 and len(made) == 1
