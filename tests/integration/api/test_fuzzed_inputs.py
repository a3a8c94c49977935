"""Requests a fuzzing session (session 16) found answered with a 500, read without bound, or admitted
into the log malformed. Each is now a 400/413 problem+json that writes nothing."""

from __future__ import annotations

import types
from typing import Any

import msgspec
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from tests.helpers import new_card
from tests.integration.api.test_claimed_times import settlement
from tests.integration.api.test_sittings import open_sitting, register
from trustscore.api.a2a_bureau import MAX_A2A_BODY, _checked_body
from trustscore.canonical import b64encode
from trustscore.errors import InvalidInput, PayloadTooLarge
from trustscore.exams.loader import ExamDirs, load_exam
from trustscore.exams.reporting import build_report
from trustscore.grading import Turn
from trustscore.kinds import cards
from trustscore.kinds.exam_report import ReportItem
from trustscore.ledger import dsse, keys, statements

Client = AsyncTestClient[Litestar]


def refused(r: Any, status: int = 400) -> str:
    assert r.status_code == status, r.text
    assert r.headers["content-type"].startswith("application/problem+json"), r.headers
    detail: str = r.json()["detail"]
    return detail


async def size(client: Client) -> int:
    return len((await client.get("/v1/log/entries", params={"start": 0})).json()["entries"])


async def test_the_a2a_endpoint_bounds_its_body_and_refuses_what_is_not_json(client: Client) -> None:
    """The SDK's app read a body of any size (150 MB, +460 MB of memory) and answered a lone surrogate in
    a JSON-RPC id with a plain-text 500."""
    big = b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"x":"' + b"a" * MAX_A2A_BODY + b'"}}'
    headers = {"content-type": "application/json"}
    assert "bytes at most" in refused(await client.post("/a2a/", content=big, headers=headers), 413)
    surrogate = b'{"jsonrpc":"2.0","id":"\\ud800","method":"tools/list"}'
    assert "not JSON" in refused(await client.post("/a2a/", content=surrogate, headers=headers))
    ok = await client.post("/a2a/", content=b'{"jsonrpc":"2.0","id":1,"method":"x"}', headers=headers)
    assert ok.status_code == 200 and ok.json()["error"]["code"] == -32601  # the SDK answers as before


@pytest.mark.parametrize(
    "path", ["/v1/agents/%00", "/v1/agents/%00/rating", "/v1/log/keys/%00", "/static/a%00.css"]
)
async def test_a_nul_in_the_path_is_refused(client: Client, path: str) -> None:
    """PostgreSQL refuses NUL in text (a 500 on every agent route), and so did the static file lookup."""
    assert "NUL" in refused(await client.get(path))


async def test_a_nul_in_a_page_path_is_a_400_page(client: Client) -> None:
    r = await client.get("/agents/%00")
    assert r.status_code == 400 and "NUL" in r.text


@pytest.mark.parametrize("when", ["2025-01-01Z", "20250101Z", "2025-W01-1Z", "2025-01-01T10:00Z"])
async def test_a_claimed_time_not_in_rfc_3339_form_is_refused(client: Client, when: str) -> None:
    """``fromisoformat`` read a date alone as a naive datetime, and comparing it with the clock raised."""
    seller, seller_card = new_card("seller")
    buyer, buyer_card = new_card("buyer")
    for card in (seller_card, buyer_card):
        assert (await client.post("/v1/log/entries", content=msgspec.json.encode(card))).status_code == 201
    before = await size(client)
    r = await client.post("/v1/settlements", content=settlement(seller, buyer, "d", settled_at=when))
    assert "RFC 3339" in refused(r)
    assert await size(client) == before


def card_with(key: keys.SigningKey, **fields: Any) -> bytes:
    """An agent-card/v1 with ``fields`` as given (no client-side check)."""
    base: dict[str, Any] = {
        "nonce": "ab" * 16,
        "issued_at": statements.format_time(statements.EARLIEST_CLAIMED),
        "public_key": b64encode(key.public_key),
        "name": "fuzzed",
        "capabilities": [],
    }
    card = msgspec.convert({**base, **fields}, cards.AgentCard)
    payload = statements.make_statement(cards.AGENT_CARD, cards.card_subject(key.public_key), card)
    return msgspec.json.encode(dsse.sign(payload, [key]))


@pytest.mark.parametrize(
    ("fields", "says"),
    [
        ({"issued_at": "2025-01-01Z"}, "RFC 3339"),
        ({"issued_at": "2025-W01-1Z"}, "RFC 3339"),
        ({"endpoint": "http://[::1/"}, "http(s) URL"),
        ({"endpoint": "https://user:pass@agent.example/"}, "user or password"),
        ({"endpoint": "https://agent.example:99999/"}, "out of range"),
        ({"endpoint": "https://agent.example:0/"}, "out of range"),
        ({"endpoint": "https://agent.example/\x00"}, "printable ASCII"),
        ({"endpoint": "https://agent.example/a\nb"}, "printable ASCII"),
    ],
)
async def test_a_card_with_a_malformed_time_or_endpoint_is_refused(
    client: Client, fields: dict[str, Any], says: str
) -> None:
    """Such cards were logged for good (an unclosed IPv6 bracket was a 500); the log's existing entries
    are still read under the rules they were admitted by (statements.check_new is intake only)."""
    before = await size(client)
    r = await client.post("/v1/log/entries", content=card_with(keys.SigningKey.generate(), **fields))
    assert says in refused(r)
    assert await size(client) == before
    fine = await client.post("/v1/log/entries", content=card_with(keys.SigningKey.generate()))
    assert fine.status_code == 201, fine.text


def test_the_lenient_parse_of_logged_times_is_aware() -> None:
    """A logged entry with a date alone is read as that date's midnight UTC, never as a naive time."""
    at = statements.parse_time("2025-01-01Z", what="t")
    assert at.tzinfo is not None and statements.format_time(at) == "2025-01-01T00:00:00.000000Z"


async def test_a_dialogue_move_postgresql_cannot_store_is_refused(client: Client) -> None:
    key = await register(client)
    opened = await open_sitting(client, key, "negotiation@1")
    sitting, token, item = opened["sitting"], opened["token"], opened["items"][0]["id"]
    for move in (b"\\u0000", b"\\ud800"):  # JSON escapes of NUL and of a lone surrogate
        body = b'{"token": "%s", "item_id": "%s", "outputs": ["%s"]}' % (token.encode(), item.encode(), move)
        r = await client.post(f"/v1/sittings/{sitting}/dialogue", content=body)
        refused(r)


def test_only_a_cards_endpoint_is_held_to_the_new_rule() -> None:
    """(Review.) A re-verification or scope run copies its endpoint from a card already logged, maybe
    under the old rule: refusing it would leave that agent's runs unrecordable."""
    old_card_endpoint = "https://user:pass@agent.example:99999/"
    ran = types.SimpleNamespace(issued_at="2026-12-03T00:00:00Z", endpoint=old_card_endpoint)
    run: Any = types.SimpleNamespace(predicate=ran, kind=types.SimpleNamespace(name="reverification"))
    statements.check_new(run, b"{}")
    card: Any = types.SimpleNamespace(predicate=ran, kind=cards.AGENT_CARD)
    with pytest.raises(InvalidInput, match="user or password"):
        statements.check_new(card, b"{}")


async def test_the_a2a_endpoint_counts_a_chunked_body_and_refuses_a_bad_length(client: Client) -> None:
    """A body without Content-Length (chunked) is counted as it arrives (the test client cannot stream
    one, so the reader is driven directly)."""
    sent = 0

    async def receive() -> dict[str, Any]:
        nonlocal sent
        sent += 1
        return {"type": "http.request", "body": b" " * 65536, "more_body": True}

    scope: Any = {"type": "http", "method": "POST", "headers": []}
    with pytest.raises(PayloadTooLarge):
        await _checked_body(scope, receive)  # type: ignore[arg-type]
    assert sent == MAX_A2A_BODY // 65536 + 1  # stopped at the first chunk past the bound
    headers = {"content-type": "application/json", "content-length": "12x"}
    assert "Content-Length" in refused(await client.post("/a2a/", content=b"{}", headers=headers))


@pytest.mark.timeout(30)  # before the fix the GET never returned
@pytest.mark.parametrize("path", ["/mcp", "/mcp/"])
async def test_the_mcp_endpoint_offers_no_event_stream(client: Client, path: str) -> None:
    """The server is stateless and never sends a message of its own, yet a GET opened an event stream
    that never ended (300 held open at once, found by fuzzing). The MCP transport lets a server answer
    405 instead, and the SDK's client then goes on without the stream."""
    r = await client.get(path, headers={"accept": "text/event-stream"}, follow_redirects=True)
    assert "POST" in refused(r, 405)
    assert r.headers["allow"] == "POST"


@pytest.mark.parametrize("method", ["DELETE", "PUT", "PATCH"])
async def test_the_mcp_endpoint_takes_only_post(client: Client, method: str) -> None:
    """The SDK answered DELETE in plain JSON and named GET and DELETE as allowed, though it serves
    neither statelessly (found by fuzzing, session 17)."""
    r = await client.request(method, "/mcp/")
    assert "POST" in refused(r, 405) and r.headers["allow"] == "POST"


async def test_options_on_the_mcp_endpoint_says_post(client: Client) -> None:
    r = await client.options("/mcp/")
    assert r.status_code == 204 and r.headers["allow"] == "POST", (r.status_code, r.headers)


@pytest.mark.parametrize(
    "path",
    [
        "/v1/log/entries?start=1e0",
        "/v1/log/entries?start=1.0",
        "/v1/log/entries?start=0.99999999999999999",
        "/v1/log/entries?end=%D9%A1",
        "/v1/agents?limit=1e1",
        "/v1/log/proof/inclusion?index=1e0&size=5",
        "/v1/log/proof/consistency?from=1.0&to=5",
        "/v1/sittings/0_5",
        "/v1/sittings/+5",
        "/v1/sittings/%205",
        "/v1/sittings/%D9%A5",
        "/v1/sittings/05",
        "/log/entries/0_5",
        "/log/entries/-0",
    ],
)
async def test_an_integer_not_in_its_one_decimal_form_is_refused(client: Client, path: str) -> None:
    """Each was read as the integer it resembles: one resource under many names (found by fuzzing)."""
    r = await client.get(path)
    assert r.status_code == 400, (path, r.status_code, r.text[:200])
    assert "decimal digits" in r.text


@pytest.mark.parametrize(
    "path",
    [
        "/v1/log/entries?start=0&end=1",
        "/v1/agents?limit=10",
        "/log/entries/0",
        "/v1/log/proof/inclusion?index=0&size=1",
    ],
)
async def test_integers_in_their_one_form_are_read(client: Client, path: str) -> None:
    assert (
        await client.post("/v1/log/entries", content=card_with(keys.SigningKey.generate()))
    ).status_code == 201
    r = await client.get(path)
    assert r.status_code != 400, (path, r.text[:200])


@pytest.mark.parametrize("when", ["2025-01-01Z", "2025-W01-1Z", "2026-11-30T00:00:00+00:00"])
async def test_a_report_whose_started_at_is_not_in_rfc_3339_form_is_refused(
    client: Client, when: str
) -> None:
    """(Left lenient in session 16, stated then.) Read by no formula, but logged for good as it came."""
    exam = load_exam("integrity@1", ExamDirs())
    key, card = new_card("reporter")
    assert (await client.post("/v1/log/entries", content=msgspec.json.encode(card))).status_code == 201
    items = [ReportItem(i.id, [Turn("no", 5)], None, 0, "failure") for i in exam.items]
    before = await size(client)
    env = build_report(exam, items, adapter="test", started_at=when, elapsed_ms=1, key=key)
    r = await client.post("/v1/reports", content=msgspec.json.encode(env))
    assert "started_at" in refused(r) and await size(client) == before
    fine = build_report(exam, items, adapter="test", started_at="2026-11-30T00:00:00Z", elapsed_ms=1, key=key)
    assert (await client.post("/v1/reports", content=msgspec.json.encode(fine))).status_code == 201


@pytest.mark.parametrize("path", ["/checkpoint", "/v1/log/checkpoint", "/v1/log/key", "/healthz"])
async def test_a_text_answer_names_its_charset_once(client: Client, path: str) -> None:
    """Litestar adds the charset to a text media type; the routes named it too, so it came twice."""
    r = await client.get(path)
    assert r.status_code == 200 and r.headers["content-type"] == "text/plain; charset=utf-8"


@pytest.mark.parametrize(
    "path",
    [
        "/v1/agents/" + "a" * 250,
        "/v1/agents/ts1_zz/rating",
        "/v1/agents/TS1_" + "A" * 40 + "/evidence",
        "/v1/log/keys/nope",
        "/agents/nope",
        "/v1/agents/nope/scope-honesty",
    ],
)
async def test_a_malformed_key_id_in_the_path_is_a_short_400(client: Client, path: str) -> None:
    """It was a 404 echoing the id in full (3,000 characters came back twice; found by fuzzing; over 255
    characters a segment is refused as such: test_an_overlong_path_segment_is_a_400)."""
    r = await client.get(path)
    assert r.status_code == 400 and "ts1_ + 40 lowercase hex" in r.text and len(r.content) < 3000, r.text[
        :300
    ]


async def test_the_renamed_history_bounds_are_integers_in_their_one_form(client: Client) -> None:
    """(Review.) ``QueryParameter(name="from")`` names the query parameter by ``name``, not ``query``."""
    agent = keys.SigningKey.generate()
    assert (await client.post("/v1/log/entries", content=card_with(agent))).status_code == 201
    for query in ("from=1e0", "to=1.0", "from=%D9%A1"):
        r = await client.get(f"/v1/agents/{agent.id}/rating/history?{query}")
        assert r.status_code == 400 and "decimal digits" in r.text, (query, r.text[:200])
    assert (await client.get(f"/v1/agents/{agent.id}/rating/history?from=0&to=5")).status_code == 200


@pytest.mark.parametrize("cursor", ["%C2%B2.0", "%D9%A5.0", "05.0", "1.%C2%B2"])
async def test_a_cursor_not_in_decimal_digits_is_a_400(client: Client, cursor: str) -> None:
    """(Review.) ``str.isdigit`` says yes to "²", and ``int`` then raised: a 500."""
    agent = keys.SigningKey.generate()
    assert (await client.post("/v1/log/entries", content=card_with(agent))).status_code == 201
    for path in (f"/v1/agents/{agent.id}/evidence", f"/agents/{agent.id}", "/v1/subscriptions/0/deliveries"):
        r = await client.get(f"{path}?after={cursor}")
        assert r.status_code == 400, (path, r.status_code, r.text[:200])


@pytest.mark.parametrize(
    "path", ["/static/" + "a" * 256, "/v1/agents/" + "a" * 300 + "/rating", "/tile/" + "0" * 300]
)
async def test_an_overlong_path_segment_is_a_400(client: Client, path: str) -> None:
    """(Review.) The static files' lookup raised on a name over 255 bytes: a 500."""
    assert "longer than 255" in refused(await client.get(path))


@pytest.mark.parametrize(
    ("path", "tail"),
    [
        ("/v1/leaderboard?model=", "served: "),
        ("/v1/leaderboard?dimension=", "one of capability"),
        ("/leaderboard?dimension=", "one of capability"),
    ],
)
async def test_a_long_input_is_not_echoed_in_full(client: Client, path: str, tail: str) -> None:
    """A 5,000-character ``?model=`` came back in full in the detail. A detail is cut in the middle past
    1,024 characters, so what was wrong and what is accepted both stay."""
    r = await client.get(path + "x" * 5000)
    assert r.status_code in (400, 404) and len(r.content) < 3000, r.text[:300]
    assert "characters left out" in r.text and tail in r.text, r.text
