"""A write a web browser sends is refused (403), and nothing is logged. The server sends no CORS headers,
so a page of another origin could never read an answer, but a POST whose Content-Type is text/plain (or
absent) needs no preflight and was carried out: any site could spread pre-signed statements over its
visitors' addresses and so past the per-address write limits (found by fuzzing: Content-Type is not
read on writes). Browsers name the page's origin on every such request, and modern ones say where the
request comes from (Sec-Fetch-Site); the SDK, the CLI and other programs send neither."""

from __future__ import annotations

import msgspec
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from tests.helpers import new_card
from tests.integration.api.test_fuzzed_inputs import refused, size

Client = AsyncTestClient[Litestar]
HOST = "testserver.local"  # the test client's Host


@pytest.mark.parametrize(
    "headers",
    [
        {"origin": "https://evil.example"},
        {"origin": "null"},  # a sandboxed frame, or after a cross-origin 307
        {"origin": f"http://{HOST}.evil.example"},
        # DNS rebinding: a page on a name re-pointed at the server is same-origin to the browser, so
        # Origin and Host agree (found by review; comparing them was the first fix)
        {"origin": "http://rebound.example", "host": "rebound.example"},
        {"origin": f"http://{HOST}"},
        {"sec-fetch-site": "cross-site"},  # a form post from a browser that sends no Origin with it
    ],
)
async def test_a_write_from_a_browser_is_refused(client: Client, headers: dict[str, str]) -> None:
    before = await size(client)
    body = msgspec.json.encode(new_card("cross")[1])
    sent = {**headers, "content-type": "text/plain;charset=UTF-8"}
    detail = refused(await client.post("/v1/log/entries", content=body, headers=sent), 403)
    assert "writes from web pages are refused" in detail
    assert await size(client) == before


async def test_a_write_from_a_program_is_served(client: Client) -> None:
    body = msgspec.json.encode(new_card("program")[1])
    r = await client.post("/v1/log/entries", content=body)
    assert r.status_code == 201, r.text


async def test_reads_from_another_origin_are_unaffected(client: Client) -> None:
    r = await client.get(
        "/checkpoint", headers={"origin": "https://evil.example", "sec-fetch-site": "cross-site"}
    )
    assert r.status_code == 200


@pytest.mark.parametrize("host", ["x:1.", "127.0.0.1:8000."])
async def test_a_malformed_host_is_a_problem_not_a_500(client: Client, host: str) -> None:
    """(Review.) A problem's ``instance`` was read from request.url, which parses the Host header."""
    r = await client.get("/v1/agents/ts1_" + "0" * 40, headers={"host": host})
    assert r.status_code == 404 and r.json()["instance"] == "/v1/agents/ts1_" + "0" * 40
