"""The served OpenAPI document says what the routes really do (issue #18, strict formats): media types,
methods, integer bounds, enumerations and patterns, and every response a route sends."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import yaml
from litestar import Litestar
from litestar.openapi.plugins import JsonRenderPlugin, RedocRenderPlugin
from litestar.testing import AsyncTestClient
from openapi_spec_validator import validate

from trustscore.kinds.graded import DIMENSIONS
from trustscore.services.ratings import RELEASED_MODELS

Client = AsyncTestClient[Litestar]
METHODS = ("get", "put", "post", "delete", "patch")


async def document(client: Client) -> dict[str, Any]:
    schema: dict[str, Any] = (await client.get("/schema/openapi.json")).json()
    validate(schema)
    return schema


def walk(node: object) -> Iterator[dict[str, Any]]:
    """Every JSON object in ``node``."""
    if isinstance(node, dict):
        yield node
        for value in node.values():
            yield from walk(value)
    elif isinstance(node, list):
        for value in node:
            yield from walk(value)


def parameter(schema: dict[str, Any], path: str, name: str, method: str = "get") -> dict[str, Any]:
    found: list[dict[str, Any]] = [
        p for p in schema["paths"][path][method]["parameters"] if p["name"] == name
    ]
    assert len(found) == 1, (path, name)
    return found[0]


async def test_metrics_described_as_prometheus_text(client: Client) -> None:
    schema = await document(client)
    content = schema["paths"]["/metrics"]["get"]["responses"]["200"]["content"]
    assert list(content) == ["text/plain; version=0.0.4"]
    r = await client.get("/metrics")
    assert r.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert "trustscore_" in r.text


async def test_options_lists_every_method_of_the_path(client: Client) -> None:
    """Litestar's own OPTIONS answer kept only the methods known when the path's first handler was
    registered: ``OPTIONS /v1/log/entries`` said ``OPTIONS, POST`` although GET is served there."""
    r = await client.options("/v1/log/entries")
    assert r.status_code == 204 and r.headers["allow"] == "GET, HEAD, OPTIONS, POST"
    schema = await document(client)
    for path, item in schema["paths"].items():
        if path.startswith("/schema"):
            continue
        concrete = path.replace("{agent_id}", "ts1_" + "0" * 40).replace("{key_id}", "ts1_" + "0" * 40)
        concrete = concrete.replace("{index}", "7")
        r = await client.options(concrete)
        expected = sorted(
            [m.upper() for m in METHODS if m in item] + ["OPTIONS"] + ["HEAD"] * ("get" in item)
        )
        assert r.status_code == 204 and r.headers["allow"] == ", ".join(expected), path


async def test_integer_bounds_are_integers(client: Client) -> None:
    """Bounds were written as floats (``"maximum": 4.611686018427388e+18``), which a strict client reads
    as a different number (2**62 is not 4611686018427388000)."""
    raw = (await client.get("/schema/openapi.json")).text
    assert "e+" not in raw
    for node in walk(await document(client)):
        if node.get("type") == "integer":
            for bound in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
                assert bound not in node or type(node[bound]) is int, node
    start = parameter(await document(client), "/v1/log/entries", "start")["schema"]
    assert start["minimum"] == 0 and start["maximum"] == 2**62
    end = parameter(await document(client), "/v1/log/entries", "end")["schema"]
    assert end == {"type": "integer", "minimum": 0, "maximum": 2**62}  # the lower bound was missing


async def test_enumerations_and_patterns_on_parameters(client: Client) -> None:
    schema = await document(client)
    assert parameter(schema, "/v1/leaderboard", "dimension")["schema"]["enum"] == list(DIMENSIONS)
    for path in (
        "/v1/leaderboard",
        "/v1/agents/{agent_id}/rating",
        "/v1/agents/{agent_id}/rating/attestation",
    ):
        assert parameter(schema, path, "model")["schema"]["enum"] == list(RELEASED_MODELS), path
    assert parameter(schema, "/v1/agents/{agent_id}/evidence", "after")["schema"]["pattern"]
    for path, name in [
        ("/v1/agents/{agent_id}", "agent_id"),
        ("/v1/agents/{agent_id}/evidence", "agent_id"),
        ("/v1/agents/{agent_id}/rating", "agent_id"),
        ("/v1/log/keys/{key_id}", "key_id"),
    ]:
        assert parameter(schema, path, name)["schema"]["pattern"] == "^ts1_[0-9a-f]{40}$", path
    r = await client.get("/v1/leaderboard", params={"dimension": "charisma"})
    assert r.status_code == 400  # outside the enumeration: refused as the document says


async def test_every_sent_response_is_described(client: Client) -> None:
    schema = await document(client)
    paths = schema["paths"]
    for path in ("/v1/log/entries", "/v1/reports", "/v1/settlements", "/v1/events"):
        responses = paths[path]["post"]["responses"]
        assert (
            responses["200"]["content"]["application/json"]["schema"]
            == (responses["201"]["content"]["application/json"]["schema"])
        ), path  # a duplicate answers 200 with the same body
    for path, item in paths.items():
        for method in METHODS:
            op = item.get(method)
            if op is None or not path.startswith("/v1/"):
                continue
            assert "503" in op["responses"], (method, path)  # the service is starting
            for code, response in op["responses"].items():
                if code in ("429", "503"):
                    assert response["headers"]["Retry-After"]["schema"]["type"] == "integer", (path, code)
                if code.startswith(("4", "5")):
                    assert list(response["content"]) == ["application/problem+json"], (path, code)
            if method == "post":
                assert {"400", "413", "429"} <= op["responses"].keys(), path
    ready = paths["/readyz"]["get"]["responses"]
    assert "503" in ready and "text/plain" in next(iter(ready["503"]["content"]))


async def test_fuzzer_findings_are_client_errors(client: Client) -> None:
    """What the schema fuzzer found: a sitting index beyond bigint was a 500; ``?model=`` was served as
    the default model; a repeated or empty parameter was read as one value or as absent."""
    huge = 2**70
    r = await client.get(f"/v1/sittings/{huge}")
    assert r.status_code == 400 and r.headers["content-type"].startswith("application/problem+json")
    r = await client.post(f"/v1/sittings/{huge}/dialogue", json={"token": "t", "item_id": "i", "outputs": []})
    assert r.status_code == 400
    for path, query in [
        ("/v1/leaderboard", "model="),
        ("/v1/agents/ts1_" + "0" * 40 + "/rating", "model="),
        ("/v1/log/entries", "start=0&start=5"),
        ("/v1/log/entries", "end="),
    ]:
        r = await client.get(f"{path}?{query}")
        assert r.status_code == 400, (path, query, r.text)
        assert "query parameter" in r.json()["detail"]
    r = await client.get("/v1/log/entries?end=null")  # Litestar read "null" as None for an int | None
    assert r.status_code == 400


async def test_the_proof_routes_describe_the_query_they_read_by_hand(client: Client) -> None:
    """The proof handlers read their query themselves (no per-request resolution): their parameters are
    described as Litestar described them, and the responses' schemas are still named."""
    schema = await document(client)
    for path, names in (
        ("/v1/log/proof/inclusion", ("index", "size")),
        ("/v1/log/proof/consistency", ("from", "to")),
    ):
        for name in names:
            p = parameter(schema, path, name)
            assert (p["in"], p["required"]) == ("query", True)
            bounds = {k: p["schema"].get(k) for k in ("type", "minimum", "maximum")}
            assert bounds == {"type": "integer", "minimum": 0, "maximum": 2**62}
        ok = schema["paths"][path]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
        assert ok["$ref"].endswith("ProofResponse")


async def test_each_rendering_of_the_document_is_made_once(client: Client, monkeypatch: Any) -> None:
    """The attack: ``GET /schema/openapi.yaml`` made Litestar dump the whole document as YAML on the event
    loop at every request (157-268 ms each, anyone's to ask for). Each rendering is now made once and
    kept, and says what the JSON document says."""
    made: list[str] = []
    for plugin in (JsonRenderPlugin, RedocRenderPlugin):
        real = plugin.render

        def counted(
            self: Any, request: Any, schema: Any, real: Any = real, name: str = plugin.__name__
        ) -> bytes:
            made.append(name)
            rendered: bytes = real(self, request, schema)
            return rendered

        monkeypatch.setattr(plugin, "render", counted)
    for dump in (yaml.dump, yaml.safe_dump):  # Litestar's YAML rendering, and ours

        def dumped(*args: Any, real: Any = dump, **kwargs: Any) -> Any:
            made.append("yaml")
            return real(*args, **kwargs)

        monkeypatch.setattr(yaml, dump.__name__, dumped)
    bodies: dict[str, set[bytes]] = {}
    for _ in range(3):
        for path in ("/schema/openapi.yaml", "/schema/openapi.yml", "/schema/openapi.json", "/schema"):
            r = await client.get(path)
            assert r.status_code == 200, (path, r.text[:300])
            bodies.setdefault(path, set()).add(r.content)
    assert sorted(made) == ["JsonRenderPlugin", "RedocRenderPlugin", "yaml"], made
    assert all(len(kept) == 1 for kept in bodies.values()), {p: len(b) for p, b in bodies.items()}
    [json_doc], [yaml_doc] = bodies["/schema/openapi.json"], bodies["/schema/openapi.yaml"]
    assert yaml.safe_load(yaml_doc) == json.loads(json_doc)  # plain YAML: before, !!python/tuple nodes
    assert bodies["/schema/openapi.yml"] == {yaml_doc}
    for path in ("/schema/redoc", "/schema/swagger", "/schema/rapidoc", "/schema/elements"):
        r = await client.get(path)
        assert r.status_code == 200 and r.headers["content-type"].startswith("text/html"), path
