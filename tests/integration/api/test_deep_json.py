"""JSON nested 1,000 levels deep is a 400 problem on every POST route, never a 500, and writes nothing."""

from __future__ import annotations

import base64
import json

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

Client = AsyncTestClient[Litestar]
DEPTH = 1000


def post_paths(client: Client) -> list[str]:
    app = client.app
    paths = [
        route.path
        for route in app.routes
        if "POST" in getattr(route, "methods", set()) and "{" not in route.path
    ]
    assert "/v1/log/entries" in paths and "/v1/reports" in paths
    return sorted(paths)


def deep_bodies() -> dict[str, bytes]:
    array = b"[" * DEPTH + b"]" * DEPTH
    obj = b'{"a":' * DEPTH + b"1" + b"}" * DEPTH
    statement = (
        b'{"_type":"https://in-toto.io/Statement/v1","subject":[{"name":"x","digest":{"sha256":"00"}}],'
        b'"predicateType":"https://trustscore.dev/agent-card/v1","predicate":' + obj + b"}"
    )
    envelope = json.dumps(
        {
            "payloadType": "application/vnd.in-toto+json",
            "payload": base64.b64encode(statement).decode(),
            "signatures": [],
        }
    ).encode()
    return {"array": array, "object": obj, "in-payload": envelope}


@pytest.mark.parametrize("shape", ["array", "object", "in-payload"])
async def test_deep_json_is_a_400_on_every_post_route(client: Client, shape: str) -> None:
    before = (await client.get("/v1/log/entries", params={"start": 0})).json()["entries"]
    for path in post_paths(client):
        r = await client.post(
            path, content=deep_bodies()[shape], headers={"content-type": "application/json"}
        )
        assert 400 <= r.status_code < 500, (path, r.status_code, r.text[:300])
        assert r.headers["content-type"].startswith("application/problem+json"), path
    after = (await client.get("/v1/log/entries", params={"start": 0})).json()["entries"]
    assert after == before
