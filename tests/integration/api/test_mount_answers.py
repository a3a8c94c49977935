"""Every answer of the MCP and A2A mounts that is not a JSON-RPC answer is problem+json, naming the path
asked (a review found plain-text 404s and 405s, a 400 with no content type at all for a body not
declared JSON, and a 413 naming ``instance: "/"``, the mount's own path)."""

from __future__ import annotations

from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

Client = AsyncTestClient[Litestar]
JSON_RPC = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
ACCEPT = {"accept": "application/json, text/event-stream"}


def problem(r: Any, status: int) -> dict[str, Any]:
    assert r.status_code == status, (r.status_code, r.headers, r.text[:300])
    assert r.headers["content-type"].startswith("application/problem+json"), r.headers
    body: dict[str, Any] = r.json()
    assert body["status"] == status and body["detail"], body
    return body


@pytest.mark.parametrize("method", ["GET", "PUT", "DELETE", "PATCH"])
@pytest.mark.parametrize("path", ["/a2a/", "/a2a"])
async def test_the_a2a_endpoint_takes_only_post(client: Client, method: str, path: str) -> None:
    r = await client.request(method, path, follow_redirects=True)
    assert "POST" in problem(r, 405)["detail"] and r.headers["allow"] == "POST"


async def test_options_on_the_a2a_endpoint_says_post(client: Client) -> None:
    r = await client.options("/a2a/")
    assert r.status_code == 204 and r.headers["allow"] == "POST", (r.status_code, r.headers)


@pytest.mark.parametrize("path", ["/a2a/x", "/a2a/.well-known/agent-card.json", "/mcp/x", "/mcp/a/b"])
async def test_a_path_under_a_mount_is_a_problem_404(client: Client, path: str) -> None:
    r = await client.post(path, json=JSON_RPC, headers=ACCEPT)
    assert problem(r, 404)["instance"] == path


@pytest.mark.parametrize("mount", ["/mcp/", "/a2a/"])
@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded"])
async def test_a_body_not_declared_json_is_a_problem_415(
    client: Client, mount: str, content_type: str | None
) -> None:
    headers = dict(ACCEPT) if content_type is None else {**ACCEPT, "content-type": content_type}
    r = await client.post(
        mount, content=b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}', headers=headers
    )
    body = problem(r, 415)
    assert body["instance"] == mount and "application/json" in body["detail"]


@pytest.mark.parametrize("mount", ["/mcp/", "/a2a/"])
async def test_json_with_its_charset_is_taken(client: Client, mount: str) -> None:
    r = await client.post(
        mount,
        content=b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}',
        headers={**ACCEPT, "content-type": "application/json; charset=utf-8"},
    )
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("mount", ["/mcp/", "/a2a/"])
async def test_a_body_too_large_names_the_path_asked(client: Client, mount: str) -> None:
    big = b'{"jsonrpc":"2.0","id":1,"method":"x","params":{"x":"' + b"a" * (5 << 20) + b'"}}'
    r = await client.post(mount, content=big, headers={**ACCEPT, "content-type": "application/json"})
    assert problem(r, 413)["instance"] == mount


@pytest.mark.parametrize("mount", ["/mcp/", "/a2a/"])
@pytest.mark.parametrize("content_type", ["Application/JSON", "APPLICATION/JSON; Charset=UTF-8"])
async def test_the_media_type_is_read_without_regard_to_case(
    client: Client, mount: str, content_type: str
) -> None:
    """The gate read the type case-insensitively (RFC 9110) but handed the header on as it came, and the
    MCP SDK compared it as it came: a JSON-RPC 415 of its own (review)."""
    r = await client.post(
        mount,
        content=b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}',
        headers={**ACCEPT, "content-type": content_type},
    )
    assert r.status_code == 200, r.text


@pytest.mark.parametrize("method", ["OPTIONS", "GET", "POST"])
async def test_a_path_under_a_mount_is_404_whatever_the_method(client: Client, method: str) -> None:
    r = await client.request(method, "/mcp/x", headers={"content-type": "application/json"})
    assert problem(r, 404)["instance"] == "/mcp/x"
