"""HEAD on every GET route: the GET's status and headers without a body. Every GET route answered 405
(found by fuzzing), ``/checkpoint`` and the tiles included, which mirrors and caches revalidate with."""

from __future__ import annotations

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from tests.integration.api.test_log_api import wait_for_size
from tests.integration.api.test_tiles_api import append_cards

Client = AsyncTestClient[Litestar]
SAME = ("content-type", "content-length", "cache-control", "etag", "vary", "content-encoding")


async def test_head_answers_as_get_without_a_body(client: Client) -> None:
    size = await append_cards(client, 3)
    await wait_for_size(client, size)
    agent = (await client.get("/v1/agents", params={"limit": 1})).json()["agents"][0]["id"]
    for path in ("/checkpoint", f"/tile/0/000.p/{size}", "/tile/entries/000.p/3", "/v1/log/entries?start=0",
                 f"/v1/agents/{agent}", "/healthz", "/", "/static/site.css", "/.well-known/agent-card.json"):  # fmt: skip
        get = await client.get(path)
        head = await client.head(path)
        assert get.status_code == head.status_code == 200, (path, head.status_code, head.text)
        assert head.content == b"", path
        for name in SAME:
            assert head.headers.get(name) == get.headers.get(name), (path, name)


@pytest.mark.parametrize("path", ["/v1/agents/ts1_" + "0" * 40, "/tile/0/x999/999", "/tile/0/0"])
async def test_head_of_a_missing_or_bad_resource_gives_the_gets_status(client: Client, path: str) -> None:
    get, head = await client.get(path), await client.head(path)
    assert head.status_code == get.status_code >= 400 and head.content == b""
    assert head.headers["content-type"] == "application/problem+json"


async def test_head_on_a_post_only_route_is_405(client: Client) -> None:
    r = await client.head("/v1/reports")
    assert r.status_code == 405 and set(r.headers["allow"].split(", ")) == {"OPTIONS", "POST"}
