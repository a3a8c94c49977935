"""The badge, the history API and the pages on a real database through the app (AsyncTestClient).

Attacks pinned here: markup in an agent's name must come out escaped on every page; a badge URL with a
malformed id or parameter is a 400 problem while a well-formed unknown id is a grey 200 badge (never an
error image, never a low score); a stale ETag is not answered with 304.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import re
import xml.etree.ElementTree as ET
from typing import Any

import msgspec
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from tests.helpers import count_calls, new_card
from tests.integration.api.test_attestations import AGENTS, on_app, post, public_of, rated
from trustscore import canonical
from trustscore.api import pages as pages_module
from trustscore.api.wiring import services_of
from trustscore.exams.loader import ExamDirs, load_exam
from trustscore.kinds.sittings import make_request
from trustscore.ledger import audit, dsse, keys, statements
from trustscore.pages import badge
from trustscore.sdk import agent_from_spec, run_exam
from trustscore.sdk.runner import sign_run
from trustscore.sdk.sitting import exam_of, sign_sitting_report
from trustscore.services import logkey, snapshots
from trustscore.services.ratings import DEFAULT_MODEL, RatingService
from trustscore.settings import Settings

Client = AsyncTestClient[Litestar]
SVG = "{http://www.w3.org/2000/svg}"
NASTY = '<script>alert("x")</script>&<b>'


def computing(client: Client) -> RatingService:
    """The app's rating service: role "all" (the tests' app) serves the ratings it computes."""
    ratings = public_of(client).ratings
    assert isinstance(ratings, RatingService)
    return ratings


async def report(client: Client, key: keys.SigningKey, exam: str = "integrity@1") -> int:
    run = run_exam(load_exam(exam, ExamDirs()), agent_from_spec(f"python:{AGENTS}:good"))
    index = await post(client, "/v1/reports", sign_run(run, key))
    await rated(client, key.id, "trustscore-v2", index + 1)
    return index


@pytest.fixture
async def world(client: Client, settings: Settings) -> dict[str, Any]:
    """A rated agent whose name is markup, an unrated one, and three snapshots."""
    key, card = new_card(NASTY)
    idle, idle_card = new_card("idle")
    await post(client, "/v1/log/entries", card)
    await post(client, "/v1/log/entries", idle_card)
    report_index = await report(client, key)
    public = public_of(client)
    service = logkey.load_or_create(settings.service_key_file)
    taken = []
    for _ in range(3):
        appended = await on_app(client, snapshots.take, public.log, public.ratings, service)
        taken.append(appended[-1].index)  # sorted by model name: trustscore-v2's statement is last
    await rated(client, key.id, "trustscore-v2", taken[-1] + 1)
    return {"key": key, "idle": idle, "report": report_index, "snapshots": taken}


async def test_badge_shows_total_grade_with_etag_cache_and_304(client: Client, world: dict[str, Any]) -> None:
    agent = world["key"].id
    rating = (await client.get(f"/v1/agents/{agent}/rating")).json()
    r = await client.get(f"/v1/agents/{agent}/badge.svg")
    assert r.status_code == 200 and r.headers["content-type"] == "image/svg+xml"
    assert r.headers["cache-control"] == "public, max-age=60" and r.headers["etag"].startswith('"')
    label = ET.fromstring(r.content).get("aria-label")
    assert label == f"trustscore: {rating['grade']} {rating['total']}"  # not re-verified: no mark
    again = await client.get(f"/v1/agents/{agent}/badge.svg", headers={"If-None-Match": r.headers["etag"]})
    assert again.status_code == 304 and again.content == b"" and again.headers["etag"] == r.headers["etag"]
    stale = await client.get(f"/v1/agents/{agent}/badge.svg", headers={"If-None-Match": '"0000"'})
    assert stale.status_code == 200 and stale.content == r.content
    dim = await client.get(f"/v1/agents/{agent}/badge.svg", params={"dimension": "integrity"})
    score = rating["dimensions"]["integrity"]["score"]
    assert ET.fromstring(dim.content).get("aria-label") == f"trustscore integrity: {score:.0f}/100"
    assert dim.headers["etag"] != r.headers["etag"]


async def test_badge_follows_the_rating(client: Client, world: dict[str, Any]) -> None:
    agent = world["key"].id
    before = await client.get(f"/v1/agents/{agent}/badge.svg", params={"dimension": "security"})
    assert "unknown" in (ET.fromstring(before.content).get("aria-label") or "")
    await report(client, world["key"], "security@1")
    after = await client.get(f"/v1/agents/{agent}/badge.svg", params={"dimension": "security"})
    assert after.headers["etag"] != before.headers["etag"]
    assert "/100" in (ET.fromstring(after.content).get("aria-label") or "")


async def test_unknown_and_unrated_agents_get_grey_badges_not_errors(
    client: Client, world: dict[str, Any]
) -> None:
    nobody = keys.SigningKey.generate().id
    for agent, word in ((nobody, "unknown"), (world["idle"].id, "unrated")):
        r = await client.get(f"/v1/agents/{agent}/badge.svg")
        assert r.status_code == 200 and r.headers["content-type"] == "image/svg+xml"
        svg = ET.fromstring(r.content)
        assert (svg.get("aria-label") or "").endswith(word)
        fills = {rect.get("fill") for rect in svg.iter(f"{SVG}rect")}
        assert badge.GREY in fills and not fills & {c for _, c in badge.COLOURS}


@pytest.mark.parametrize(
    "path",
    [
        "/v1/agents/not-an-id/badge.svg",
        "/v1/agents/{agent}/badge.svg?dimension=charm",
        "/v1/agents/{agent}/badge.svg?dimension=",
        "/v1/agents/{agent}/badge.svg?model=a&model=b",
    ],
)
async def test_a_malformed_badge_url_is_a_problem(client: Client, world: dict[str, Any], path: str) -> None:
    r = await client.get(path.format(agent=world["key"].id))
    assert r.status_code == 400 and r.headers["content-type"] == "application/problem+json", r.text
    model = await client.get(f"/v1/agents/{world['key'].id}/badge.svg", params={"model": "nope"})
    assert model.status_code == 404 and model.headers["content-type"] == "application/problem+json"


async def test_history_lists_every_snapshot_with_its_log_index_paged(
    client: Client, world: dict[str, Any]
) -> None:
    agent = world["key"].id
    r = await client.get(f"/v1/agents/{agent}/rating/history")
    body = r.json()
    assert r.status_code == 200 and body["model_version"] == "trustscore-v2" and body["next"] is None
    assert [p["index"] for p in body["points"]] == world["snapshots"]
    assert all(p["at"].endswith("Z") and isinstance(p["total"], int) for p in body["points"])
    first = (await client.get(f"/v1/agents/{agent}/rating/history", params={"limit": 2})).json()
    assert [p["index"] for p in first["points"]] == world["snapshots"][:2]
    rest = (
        await client.get(f"/v1/agents/{agent}/rating/history", params={"from": first["next"], "limit": 2})
    ).json()
    assert [p["index"] for p in rest["points"]] == world["snapshots"][2:] and rest["next"] is None
    window = {"from": world["snapshots"][1], "to": world["snapshots"][2]}
    mid = (await client.get(f"/v1/agents/{agent}/rating/history", params=window)).json()
    assert [p["index"] for p in mid["points"]] == [world["snapshots"][1]]
    idle = (await client.get(f"/v1/agents/{world['idle'].id}/rating/history")).json()
    assert idle["points"] == []  # registered, never rated: no snapshot, not a zero


@pytest.mark.parametrize(
    ("params", "status"),
    [({"from": 5, "to": 4}, 400), ({"limit": 1001}, 400), ({"limit": 0}, 400), ({"model": "nope"}, 404)],
)
async def test_history_bounds(
    client: Client, world: dict[str, Any], params: dict[str, Any], status: int
) -> None:
    r = await client.get(f"/v1/agents/{world['key'].id}/rating/history", params=params)
    assert r.status_code == status, r.text
    nobody = await client.get(f"/v1/agents/{keys.SigningKey.generate().id}/rating/history")
    assert nobody.status_code == 404


async def test_pages_escape_what_an_agent_writes_in_its_card(client: Client, world: dict[str, Any]) -> None:
    agent = world["key"].id
    for path in (f"/agents/{agent}", "/leaderboard", "/", "/?q=script"):
        r = await client.get(path)
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
        assert "<script>alert" not in r.text and "<b>" not in r.text, path
        assert "script-src 'self'" in r.headers["content-security-policy"]  # and no inline script runs
    profile = (await client.get(f"/agents/{agent}")).text
    assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;&amp;&lt;b&gt;" in profile
    entry = (await client.get(f"/log/entries/{world['report'] - 2}")).text  # the card itself
    assert "<script>alert" not in entry


async def test_error_pages_carry_every_pages_security_headers(client: Client) -> None:
    """An exception handler's response does not get the controller's headers: the 400 and 404 pages had
    no Content-Security-Policy and no nosniff (found by review, 2026-12-07)."""
    unknown = f"/agents/{keys.SigningKey.generate().id}"
    for path, status in (
        ("/agents/ts1_00", 400),
        (unknown, 404),
        ("/log/entries/999999999", 404),
        ("/?q=%09", 400),
    ):
        r = await client.get(path)
        assert r.status_code == status and r.headers["content-type"].startswith("text/html"), (
            path,
            r.status_code,
        )
        assert "frame-ancestors 'none'" in r.headers["content-security-policy"], path
        assert r.headers["x-content-type-options"] == "nosniff", path


async def test_search_finds_by_name_and_goes_straight_to_an_exact_id(
    client: Client, world: dict[str, Any]
) -> None:
    r = await client.get("/", params={"q": "IDLE"})
    assert f"/agents/{world['idle'].id}" in r.text
    r = await client.get("/", params={"q": world["idle"].id}, follow_redirects=False)
    assert r.status_code in (301, 302, 303, 307) and r.headers["location"] == f"/agents/{world['idle'].id}"


async def test_failed_pages_are_html_with_the_right_status(client: Client, world: dict[str, Any]) -> None:
    for path, status in [
        (f"/agents/{keys.SigningKey.generate().id}", 404),
        ("/log/entries/999999", 404),
        ("/leaderboard?dimension=charm", 400),
        ("/leaderboard?model=nope", 404),
    ]:
        r = await client.get(path)
        assert r.status_code == status and r.headers["content-type"].startswith("text/html"), (path, r.text)
        assert "<h1>" in r.text


async def test_the_profile_has_the_chart_badge_snippets_and_attestation(
    client: Client, world: dict[str, Any]
) -> None:
    agent = world["key"].id
    html = (await client.get(f"/agents/{agent}")).text
    assert html.count('class="point"') == len(world["snapshots"])
    assert f"/v1/agents/{agent}/badge.svg)](" in html  # the Markdown snippet
    assert f"/v1/agents/{agent}/rating/attestation?format=bundle" in html
    assert f'href="/log/entries/{world["report"]}"' in html  # evidence links to its entry


async def test_the_api_document_describes_badge_and_history_but_not_pages(client: Client) -> None:
    doc = (await client.get("/schema/openapi.json")).json()
    paths = doc["paths"]
    badge_op = paths["/v1/agents/{agent_id}/badge.svg"]["get"]
    assert "image/svg+xml" in badge_op["responses"]["200"]["content"]
    assert {p["name"] for p in badge_op["parameters"]} >= {"agent_id", "model", "dimension"}
    history = paths["/v1/agents/{agent_id}/rating/history"]["get"]
    assert {p["name"] for p in history["parameters"]} >= {"agent_id", "model", "from", "to", "limit"}
    assert not {"/", "/leaderboard", "/log", "/methodology"} & paths.keys()
    # An agent's Atom feed is an API route (docs/webhooks.md); the pages beside it are not.
    assert not [
        p for p in paths if p.startswith(("/agents", "/static", "/log/")) and not p.endswith("/feed.atom")
    ]


async def test_a_kept_profile_page_is_not_served_once_the_rating_moved(
    client: Client, world: dict[str, Any]
) -> None:
    agent = world["key"].id
    first = (await client.get(f"/agents/{agent}")).text
    assert (await client.get(f"/agents/{agent}")).text == first  # kept and served again
    assert 'aria-label="security unknown"' in first
    await report(client, world["key"], "security@1")
    after = (await client.get(f"/agents/{agent}")).text
    assert 'aria-label="security unknown"' not in after
    rating = (await client.get(f"/v1/agents/{agent}/rating")).json()
    assert f'{rating["total"]}<span class="of">' in after


async def settled_page(client: Client, agent: str) -> str:
    """The agent's page once the log is still (the integrator signs checkpoints in the background, and
    a new checkpoint is a new page): two reads in a row that are the same."""
    last = (await client.get(f"/agents/{agent}")).text
    for _ in range(100):
        await asyncio.sleep(0.05)
        page = (await client.get(f"/agents/{agent}")).text
        if page == last:
            return page
        last = page
    raise AssertionError("the page kept changing")


async def test_a_refresh_for_decay_alone_serves_the_kept_page_while_it_renders(
    client: Client, world: dict[str, Any]
) -> None:
    """A periodic refresh gives every agent a new rating object with no new log entry. Readers then get
    the kept page (which names its computed time) while one background task renders it again, instead
    of all waiting for renders; the next read after that render shows the new time. New evidence is
    never served stale (test_a_kept_profile_page_is_not_served_once_the_rating_moved)."""
    agent = world["key"].id
    pages = services_of(client.app.state).pages
    first = await settled_page(client, agent)
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=3)
    computing(client).recompute([agent], at=later)
    assert (await client.get(f"/agents/{agent}")).text == first  # the kept page, within MAX_STALE
    await on_app(client, pages.rendered.settled)
    renewed = (await client.get(f"/agents/{agent}")).text
    assert renewed != first and f"Computed {statements.format_time(later)}" in renewed


async def sat(client: Client, name: str, persona: str, exam: str = "capability@1") -> keys.SigningKey:
    """A new agent that sat a fresh sitting of ``exam`` answering as ``persona`` (the server's items:
    real evidence for medals; a public exam file's answers are public, so its items never count)."""
    key, card = new_card(name)
    await post(client, "/v1/log/entries", card)
    r = await client.post(
        "/v1/sittings", content=msgspec.json.encode(dsse.sign(make_request(key.id, exam), [key]))
    )
    assert r.status_code == 201, r.text
    opened = r.json()
    run = run_exam(exam_of(opened), agent_from_spec(f"python:{AGENTS}:{persona}"), grade=False)
    entries = (
        await client.get("/v1/log/entries", params={"start": opened["sitting"], "end": opened["sitting"] + 1})
    ).json()
    leaf = json.loads(canonical.b64decode(entries["entries"][0]["leaf"]))
    commitment = json.loads(canonical.b64decode(leaf["payload"]))["predicate"]["commitment"]
    envelope = sign_sitting_report(run, key, opened["sitting"], commitment)
    r = await client.post(f"/v1/sittings/{opened['sitting']}/report", content=msgspec.json.encode(envelope))
    assert r.status_code == 201, r.text
    await rated(client, key.id, "trustscore-v2", r.json()["close_index"] + 1)
    return key


def medals_section(html: str) -> str:
    start = html.index('<section aria-labelledby="medals-h">')
    return html[start : html.index("</section>", start)]


async def test_medals_on_the_profile_leaderboard_and_badge(client: Client, world: dict[str, Any]) -> None:
    """A good capability sitting earns a medal (many real items, fresh, score over a threshold); one
    whose every answer fails is scored but below bronze; an agent without evidence has no score, not a low one."""
    good = await sat(client, "medalled", "good")
    # Every reply unusable, so every item fails whatever the sitting's seed (the careless persona's fresh
    # sittings scored bronze now and then: a fresh sitting's items vary by seed).
    careless = await sat(client, "careless", "garbage")
    rating = (await client.get(f"/v1/agents/{good.id}/rating")).json()
    held = rating["medals"]["dimensions"]["capability"]
    assert held["medal"] in ("bronze", "silver", "gold") and held["real_n"] >= 3  # the fixture earns one
    section = medals_section((await client.get(f"/agents/{good.id}")).text)
    assert f'<span class="medal {held["medal"]}">{held["medal"]}</span>' in section  # a word, not a colour
    assert "1 medal under trustscore-v2" in section
    assert "no medal: no score in this dimension yet (unknown, not low)" in section  # e.g. security
    assert "bronze 60 · silver 75 · gold 88" in section

    other = (await client.get(f"/v1/agents/{careless.id}/rating")).json()["medals"]["dimensions"]
    assert other["capability"] == {
        "medal": None,
        "real_n": held["real_n"],
        "freshness": 1.0,
        "reason": "below_bronze",
    }
    section = medals_section((await client.get(f"/agents/{careless.id}")).text)
    assert "No medal yet" in section and "no medal: the score is below bronze (60)" in section
    assert 'class="medal ' not in section

    idle = medals_section((await client.get(f"/agents/{world['idle'].id}")).text)
    assert idle.count("no medal: no score in this dimension yet") == 8 and "no real item" in idle

    # A model without a medals file shows no medal table and says why: null is not "no medals".
    baseline = medals_section(
        (await client.get(f"/agents/{good.id}", params={"model": "baseline-v0.3"})).text
    )
    assert "Medals are not defined for this model (baseline-v0.3)" in baseline and "<table" not in baseline

    board = (await client.get("/leaderboard")).text
    row = board[board.index(f'href="/agents/{good.id}"') :]
    row = row[: row.index("</tr>")]
    assert f'<span class="medal {held["medal"]}">capability {held["medal"]}</span>' in row
    row = board[board.index(f'href="/agents/{careless.id}"') :]
    assert '<span class="unknown">none</span>' in row[: row.index("</tr>")]
    plain = (await client.get("/leaderboard", params={"model": "baseline-v0.3"})).text
    assert "Medals are not defined for baseline-v0.3" in plain and 'class="medal ' not in plain

    dim = await client.get(f"/v1/agents/{good.id}/badge.svg", params={"dimension": "capability"})
    score = rating["dimensions"]["capability"]["score"]
    label = f"trustscore capability: {score:.0f}/100 · {held['medal']}"
    assert ET.fromstring(dim.content).get("aria-label") == label
    total = await client.get(f"/v1/agents/{good.id}/badge.svg")  # the total badge stays short: no medals
    assert (
        ET.fromstring(total.content).get("aria-label") == f"trustscore: {rating['grade']} {rating['total']}"
    )
    below = await client.get(f"/v1/agents/{careless.id}/badge.svg", params={"dimension": "capability"})
    assert "·" not in (ET.fromstring(below.content).get("aria-label") or "")


async def test_a_medal_lost_to_staleness_changes_the_badge_etag_and_the_page(
    client: Client, world: dict[str, Any]
) -> None:
    """40 days on (freshness 0.5 ** (40 / 30) < 0.5) the medal is gone: the badge loses its medal and
    gets a new ETag (a client holding the old one gets the new badge, not a 304), the page says stale."""
    good = await sat(client, "medalled", "good")
    path = f"/v1/agents/{good.id}/badge.svg"
    before = await client.get(path, params={"dimension": "capability"})
    assert "·" in (ET.fromstring(before.content).get("aria-label") or "")
    await client.get(f"/agents/{good.id}")  # kept: must not be served once the medal moved
    later = dt.datetime.now(dt.UTC) + dt.timedelta(days=40)
    computing(client).recompute([good.id], at=later)
    # Only the time moved (no new entry): the first reads may get the kept badge and page while they are
    # made again in the background (test_a_refresh_for_decay_alone_serves_the_kept_page_while_it_renders).
    pages = services_of(client.app.state).pages
    await client.get(path, params={"dimension": "capability"})
    await client.get(f"/agents/{good.id}")
    await on_app(client, pages._badges.settled)
    await on_app(client, pages.rendered.settled)
    after = await client.get(
        path, params={"dimension": "capability"}, headers={"If-None-Match": before.headers["etag"]}
    )
    assert after.status_code == 200 and after.headers["etag"] != before.headers["etag"]
    assert "·" not in (ET.fromstring(after.content).get("aria-label") or "")
    section = medals_section((await client.get(f"/agents/{good.id}")).text)
    assert "no medal: the newest real evidence is too old (freshness 0.40, at least 0.5 needed" in section


async def test_the_log_page_lists_entries_without_reading_their_leaves(
    client: Client, world: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attack: /log read, parsed and pretty-printed the payload of each of its 25 entries for a list
    that shows none of it (1.2 s with 25 large reports). It now lists kind, signer and subject as the
    log kept them beside each leaf: what each entry's own page, which does parse it, shows."""
    parsed = count_calls(monkeypatch, audit, "parse_leaf")
    html = (await client.get("/log")).text
    assert parsed[0] == 0, parsed
    rows = re.findall(
        r'<tr><td><a href="/log/entries/(\d+)">\d+</a></td><td>([^<]*)</td>'
        r'<td><code class="id">([^<]*)</code></td><td><code class="id">([^<]*)</code></td></tr>',
        html,
    )
    assert len(rows) >= 5 and [int(r[0]) for r in rows] == sorted((int(r[0]) for r in rows), reverse=True)
    for index, kind, signer, subject in rows[:5]:
        entry = (await client.get(f"/log/entries/{index}")).text  # parsed there, from the leaf
        assert kind in entry and signer in entry and subject in entry, index


async def test_the_methodology_page_is_rendered_once(client: Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """It showed the same published files at every request and rendered them again each time (Markdown
    and template, 35-67 ms of the event loop); now once per process, with the page's headers."""
    rendered = count_calls(monkeypatch, pages_module._markdown, "render")
    bodies = set()
    for _ in range(3):
        r = await client.get("/methodology")
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html"), r.text[:300]
        assert "script-src 'self'" in r.headers["content-security-policy"]
        assert r.headers["cache-control"] == "max-age=5, public"
        bodies.add(r.content)
    assert rendered == [1] and len(bodies) == 1
    assert b"trustscore-v2" in r.content and b"<h1" in r.content


async def test_spellings_of_one_profile_page_share_its_rendering(
    client: Client, world: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kept pages were keyed by the raw query: no ``?model=`` and the default model's name (one page)
    were rendered and kept apart. A cursor has one spelling (leading zeros are refused)."""
    agent = world["key"].id
    first = await settled_page(client, agent)  # rendered and kept without ?model=
    rendered = count_calls(monkeypatch, pages_module, "_agent_page")
    assert (await client.get(f"/agents/{agent}", params={"model": DEFAULT_MODEL})).text == first
    assert rendered == [0]  # the default model named: the same kept page
    cursor = {"after": "1.0"}
    paged = (await client.get(f"/agents/{agent}", params=cursor)).text
    assert (await client.get(f"/agents/{agent}", params={**cursor, "model": DEFAULT_MODEL})).text == paged
    assert rendered == [1]
    for bad in ("01.0", "1.x"):
        assert (await client.get(f"/agents/{agent}", params={"after": bad})).status_code == 400


async def test_a_bad_cursor_is_refused_before_the_agent_is_looked_up(client: Client) -> None:
    """As on ``GET /v1/agents/{id}/evidence``: the query is checked before the agent, so an unknown agent
    with a bad cursor is a 400, not a 404 (the page parses ``?after=`` once, before its kept page)."""
    unknown = keys.SigningKey.generate().id
    assert (await client.get(f"/agents/{unknown}")).status_code == 404
    for path in (f"/agents/{unknown}", f"/v1/agents/{unknown}/evidence"):
        assert (await client.get(path, params={"after": "1.x"})).status_code == 400, path
