"""Registered agents without evidence cost the public reads nothing per agent.

A key is free, and a card registers it: before 2026-12-06 every leaderboard read (the JSON route, its page
and the home page, which shows the top ten) computed the all-null rating of every registered agent
without evidence, 1-2 ms each, so 10^4 free keys made each visit to the home page cost ~20 s of the API
process's event loop. Now that rating is computed once per model and copied for the agents shown, and
the leaderboard lists agents without asking for every one's rating."""

from __future__ import annotations

import asyncio
import datetime as dt
import math
import threading
from dataclasses import replace
from typing import Any

import msgspec
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from tests.helpers import count_calls, new_card
from tests.integration.api.test_attestations import from_address, on_app
from trustscore.api import pages as pages_module
from trustscore.api.wiring import STATE_KEY
from trustscore.exams.loader import DEFAULT_PUBLIC_DIR, ExamDirs, load_exam
from trustscore.sdk import agent_from_spec, run_exam
from trustscore.sdk.runner import sign_run
from trustscore.services import ratings as ratings_module
from trustscore.services.reverify import STATUS_CHUNK
from trustscore.settings import Settings
from trustscore.store.reverify import ReverifyStore

Client = AsyncTestClient[Litestar]
AGENTS = DEFAULT_PUBLIC_DIR.parent / "examples" / "agents" / "scripted.py"
IDLE = 40
VARYING = ("agent", "computed_at", "scope_honesty", "log_size", "checkpoint_size")


@pytest.fixture
def scorings(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the scorings of an agent without evidence (RatingView.unrated's path)."""
    calls = [0]
    real = ratings_module.score_agents  # type: ignore[attr-defined]

    def counted(*args: Any, **kwargs: Any) -> Any:
        # Only the all-null rating's scoring (no evidence, no snapshots, one agent): not a refresh's
        # (score_agents of held rows), nor one of another test's app that is still stopping.
        if args[:2] == ([], []) and len(kwargs.get("agents") or ()) == 1:
            calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(ratings_module, "score_agents", counted)
    return calls


async def _register_idle(client: Client) -> list[str]:
    cards = [new_card(f"idle {i}") for i in range(IDLE)]
    body = b"[" + b",".join(msgspec.json.encode(card) for _, card in cards) + b"]"
    r = await client.post("/v1/log/entries", content=body)
    assert r.status_code in (200, 201), r.text
    ids = sorted(key.id for key, _ in cards)
    for _ in range(400):
        listed = (await client.get("/v1/agents", params={"limit": 1000})).json()["agents"]
        if {a["id"] for a in listed} >= set(ids):
            return ids
        await asyncio.sleep(0.05)
    raise AssertionError("the cards were not projected")


async def test_leaderboard_and_home_page_do_not_rate_each_idle_agent(
    client: Client, scorings: list[int]
) -> None:
    ids = await _register_idle(client)
    scorings[0] = 0
    board = (await client.get("/v1/leaderboard", params={"limit": 3})).json()
    assert board["ranked"] == [], board
    assert [(u["agent"], u["reason"]) for u in board["unranked"]] == [(a, "no_evidence") for a in ids[:3]], (
        board
    )
    home = await client.get("/")
    assert home.status_code == 200, home.text[:2000]
    page = await client.get("/leaderboard")
    assert page.status_code == 200 and ids[-1] in page.text, page.text[:2000]  # all 40 fit its table of 100
    for model in ("trustscore-v2", "baseline-v0.3"):
        board = (await client.get("/v1/leaderboard", params={"limit": 1000, "model": model})).json()
        assert [u["agent"] for u in board["unranked"]] == ids
    # Each served model's all-null rating computed once at most (before: once per idle agent per read).
    assert scorings[0] <= 2, scorings[0]


async def test_an_idle_agents_rating_is_not_scored_per_request(client: Client, scorings: list[int]) -> None:
    ids = await _register_idle(client)
    scorings[0] = 0
    bodies = [(await client.get(f"/v1/agents/{a}/rating")).json() for a in ids]
    assert scorings[0] <= 1, scorings[0]
    for agent, rating in zip(ids, bodies, strict=True):
        assert rating["agent"] == agent and rating["total"] is None
        assert rating["null_reasons"]["total"] == "no_scored_dimensions"
    # The same body for every idle agent but what names the agent or the moment.
    shapes = {msgspec.json.encode({k: v for k, v in b.items() if k not in VARYING}) for b in bodies}
    assert len(shapes) == 1


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return replace(settings, rating_refresh_interval=0.1)  # the decay refresh, for the last test


@pytest.mark.parametrize("in_loop", [True, False], ids=["made-in-the-loop", "made-in-a-thread"])
async def test_a_kept_leaderboard_follows_registrations_and_ratings(client: Client, in_loop: bool) -> None:
    """The kept board is made again when an agent registers or a rating changes, never served stale;
    whether it is made on the event loop (few agents) or in a thread."""
    if not in_loop:
        client.app.state[STATE_KEY].public.board_in_loop = 0
    first = await _register_idle(client)
    board = (await client.get("/v1/leaderboard", params={"limit": 1000})).json()
    assert [u["agent"] for u in board["unranked"]] == first and board["ranked"] == []
    newcomer, card = new_card("newcomer")
    assert (await client.post("/v1/log/entries", content=msgspec.json.encode(card))).status_code in (200, 201)
    for _ in range(400):
        board = (await client.get("/v1/leaderboard", params={"limit": 1000})).json()
        if newcomer.id in [u["agent"] for u in board["unranked"]]:
            break
        await asyncio.sleep(0.05)
    assert [u["agent"] for u in board["unranked"]] == sorted([*first, newcomer.id])

    run = run_exam(load_exam("integrity@1", ExamDirs()), agent_from_spec(f"python:{AGENTS}:good"))
    r = await client.post("/v1/reports", content=msgspec.json.encode(sign_run(run, newcomer)))
    assert r.status_code in (200, 201), r.text
    for _ in range(400):
        rating = (await client.get(f"/v1/agents/{newcomer.id}/rating")).json()
        if rating["total"] is not None:
            break
        await asyncio.sleep(0.05)
    board = (await client.get("/v1/leaderboard", params={"limit": 1000})).json()
    assert [(r["rank"], r["agent"], r["total"]) for r in board["ranked"]] == [
        (1, newcomer.id, rating["total"])
    ]
    assert [u["agent"] for u in board["unranked"]] == first

    # A rating that moves with the time alone (the periodic decay refresh, no new entry): the board follows.
    ratings = client.app.state[STATE_KEY].public.ratings
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=200)
    ratings.clock = lambda: later
    for _ in range(400):
        moved = (await client.get(f"/v1/agents/{newcomer.id}/rating")).json()
        if moved["total"] != rating["total"]:
            break
        await asyncio.sleep(0.05)
    assert moved["total"] != rating["total"]
    board = (await client.get("/v1/leaderboard", params={"limit": 1000})).json()
    assert [(r["agent"], r["total"]) for r in board["ranked"]] == [(newcomer.id, moved["total"])]


async def test_a_board_of_many_agents_is_made_once_in_a_thread(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attack: with 10^5 rated agents one pass over them to make a board again cost ~250 ms, on the
    event loop, at the first read of each of the 18 boards after any rating moved (a report, a card).
    Past ``board_in_loop`` agents it is made in a thread from a copy of the ratings, once for the reads
    arriving together, and answers as a board made in the loop."""
    ids = await _register_idle(client)
    public = client.app.state[STATE_KEY].public
    public.board_in_loop = 10**9
    sizes = [public.ratings.size]
    expected = [(await client.get("/v1/leaderboard", params={"limit": n})).json() for n in (1000, 7)]
    sizes.append(public.ratings.size)
    # The log size its ratings are of, named (the projector may still be moving the view meanwhile).
    assert all(sizes[0] <= board.pop("log_size") <= sizes[1] for board in expected), (sizes, expected)
    public.board_in_loop = len(ids) - 1
    made: list[int] = []
    real = type(public)._board

    def counted(*args: Any) -> Any:
        made.append(threading.get_ident())
        return real(*args)

    monkeypatch.setattr(type(public), "_board", staticmethod(counted))
    public._boards.clear()  # as after a change
    answers = await asyncio.gather(
        *(client.get("/v1/leaderboard", params={"limit": n}) for n in (1000, 7, 1000))
    )
    boards = [a.json() for a in answers]
    assert all(sizes[0] <= board.pop("log_size") <= public.ratings.size for board in boards)
    assert boards == [expected[0], expected[1], expected[0]]
    assert len(made) == 1 and made[0] != threading.get_ident(), made
    assert (await client.get("/")).status_code == 200 and len(made) == 1  # the home page's top ten: kept


async def test_the_agent_list_pages_through_every_agent_in_id_order(client: Client) -> None:
    ids = await _register_idle(client)
    pages, after = [], None
    while True:
        params: dict[str, Any] = {"limit": 7, **({"after": after} if after else {})}
        page = [a["id"] for a in (await client.get("/v1/agents", params=params)).json()["agents"]]
        if not page:
            break
        pages.append(page)
        after = page[-1]
    assert [a for page in pages for a in page] == ids and all(len(p) == 7 for p in pages[:-1])
    # A cursor that is no agent's id starts after where it would sort.
    middle = ids[20][:10]
    listed = (await client.get("/v1/agents", params={"limit": 1000, "after": middle})).json()["agents"]
    assert [a["id"] for a in listed] == [a for a in ids if a > middle]


async def test_an_idle_agents_rating_body_is_kept_while_the_log_stays(client: Client) -> None:
    """Its all-null body was made again at every read (card, re-verification, ladder, scope: ~4 ms)."""
    ids = await _register_idle(client)
    public = client.app.state[STATE_KEY].public
    made: list[str] = []
    real = public.verification

    async def counted(agent: str) -> Any:
        made.append(agent)
        return await real(agent)

    public.verification = counted
    for _ in range(100):  # until two reads meet the same checkpoint (the integrator may still be moving)
        first = (await client.get(f"/v1/agents/{ids[0]}/rating")).json()
        made.clear()
        second = (await client.get(f"/v1/agents/{ids[0]}/rating")).json()
        if first["checkpoint_size"] == second["checkpoint_size"]:
            break
        await asyncio.sleep(0.05)
    assert made == [] and first == second  # the second read made nothing: the first's body was kept


async def test_a_leaderboard_page_reads_its_rows_statuses_together(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each of the page's rows read its agent's re-verification status alone, two queries a row (with its
    scope summary, ~2.4 ms a row: 0.48 s for a page of 200 rows); now two queries for the page."""
    ids = await _register_idle(client)
    queries: list[str] = []
    for name in ("leaves_after", "endpoints"):
        real = getattr(ReverifyStore, name)

        def counted(*args: Any, _real: Any = real, _name: str = name) -> Any:
            if args[-1] is not None:  # not the scheduler's endpoints(None), which may run meanwhile
                queries.append(_name)
            return _real(*args)

        monkeypatch.setattr(ReverifyStore, name, counted)
    chunks = math.ceil(len(ids) / STATUS_CHUNK)
    for path in ("/leaderboard", "/"):
        queries.clear()
        page = await client.get(path)
        assert page.status_code == 200, page.text[:2000]
        # The home page shows only ranked agents (none here): no query; before, 40 of each on /leaderboard.
        expected = chunks if path == "/leaderboard" else 0
        assert queries.count("leaves_after") == queries.count("endpoints") == expected, (path, queries)
    page = await client.get("/leaderboard")
    assert all(a in page.text for a in ids) and page.text.count("never checked") == len(ids)


async def test_a_leaderboard_page_is_kept_while_its_board_and_checkpoint_hold(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Each view of /leaderboard read its rows' statuses and scope summaries and rendered every row again
    (~86 ms with 50 rated agents of a year's re-verification runs), anyone's to repeat. The rendered page
    is now kept while its board and the checkpoint hold, for at most BOARD_PAGE_AGE seconds."""
    ids = await _register_idle(client)
    public = client.app.state[STATE_KEY].public
    read = count_calls(monkeypatch, public, "verifications")
    for _ in range(100):  # until two views meet the same checkpoint (the integrator may still be moving)
        first = await client.get("/leaderboard")
        before = read[0]
        second = await client.get("/leaderboard")
        if read[0] == before:
            break
        await asyncio.sleep(0.05)
    assert read[0] == before and second.content == first.content  # the second view read nothing
    assert (
        second.headers["content-type"].startswith("text/html") and "content-security-policy" in second.headers
    )
    assert all(a in second.text for a in ids)
    # A new agent moves the board: the next view renders it again and lists the newcomer.
    newcomer, card = new_card("board newcomer")
    assert (await client.post("/v1/log/entries", content=msgspec.json.encode(card))).status_code in (200, 201)
    for _ in range(400):
        page = await client.get("/leaderboard")
        if newcomer.id in page.text:
            break
        await asyncio.sleep(0.05)
    assert newcomer.id in page.text
    # Past its age a page is rendered again though nothing moved (a scope status may change with time).
    monkeypatch.setattr(pages_module, "BOARD_PAGE_AGE", 0.0)
    before = read[0]
    assert (await client.get("/leaderboard")).status_code == 200 and read[0] > before
    # Readers arriving together after a change share one rendering per stamp (before: each rendered it).
    monkeypatch.setattr(pages_module, "BOARD_PAGE_AGE", 30.0)
    service = client.app.state[STATE_KEY].pages
    stamps: list[Any] = []
    real_render = service._render_board

    async def recorded(key: Any, stamp: Any, render: Any) -> bytes:
        stamps.append(stamp)
        body: bytes = await real_render(key, stamp, render)
        return body

    monkeypatch.setattr(service, "_render_board", recorded)
    service.boards.clear()  # as after a change

    async def together() -> list[int]:  # on the app's own loop: the readers are in flight at once
        async with from_address(client, "203.0.113.5") as c:
            return [r.status_code for r in await asyncio.gather(*(c.get("/leaderboard") for _ in range(8)))]

    assert await on_app(client, together) == [200] * 8
    assert stamps and len(stamps) == len(set(stamps)), stamps  # never two renderings of one stamp
