"""A write a web page on another origin makes a visitor's browser send is refused (403), and nothing is
logged. The server sends no CORS headers, so such a page could never read an answer, but a POST whose
Content-Type is text/plain (or absent) needs no preflight and was carried out: any site could spread
pre-signed statements over its visitors' addresses and so past the per-address write limits (found by
fuzzing: Content-Type is not read on writes). Browsers name the page's origin on every such request;
the SDK, the CLI and other programs send no Origin and are not affected."""

from __future__ import annotations

import msgspec
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from tests.helpers import new_card
from tests.integration.api.test_fuzzed_inputs import refused, size

Client = AsyncTestClient[Litestar]


@pytest.mark.parametrize("origin", ["https://evil.example", "null", "http://testserver.local.evil.example"])
async def test_a_write_from_another_origin_is_refused(client: Client, origin: str) -> None:
    before = await size(client)
    body = msgspec.json.encode(new_card("cross")[1])
    headers = {"origin": origin, "content-type": "text/plain;charset=UTF-8"}
    detail = refused(await client.post("/v1/log/entries", content=body, headers=headers), 403)
    assert "another origin" in detail
    assert await size(client) == before


async def test_a_write_from_a_program_or_the_same_origin_is_served(client: Client) -> None:
    host = client.base_url.netloc.decode()
    for headers in ({}, {"origin": f"http://{host}"}, {"origin": f"https://{host}"}):
        body = msgspec.json.encode(new_card("program")[1])
        r = await client.post("/v1/log/entries", content=body, headers=headers)
        assert r.status_code == 201, (headers, r.text)


async def test_reads_from_another_origin_are_unaffected(client: Client) -> None:
    r = await client.get("/checkpoint", headers={"origin": "https://evil.example"})
    assert r.status_code == 200
