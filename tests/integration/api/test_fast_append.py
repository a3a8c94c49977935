"""``POST /v1/log/entries`` in its plain form is answered without Litestar (trustscore.api.fast_append).

Every request here is sent both ways: plainly (the fast path) and with a query string, which sends it
through the framework's router, hooks and exception handlers as before. The answers must be the same:
status, headers and body, byte for byte where the request leaves nothing to differ.
"""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import msgspec
import pytest
from litestar import Litestar
from litestar.datastructures import State
from litestar.testing import AsyncTestClient

from tests.helpers import new_card
from tests.integration.api.test_fuzzed_inputs import size
from trustscore.api import fast_append
from trustscore.api.app import create_app
from trustscore.api.wiring import STATE_KEY
from trustscore.ledger import dsse
from trustscore.settings import Settings

Client = AsyncTestClient[Litestar]
PATH = "/v1/log/entries"
FRAMEWORK = PATH + "?via=framework"  # a query string: the request goes through Litestar


@pytest.fixture
def fast_calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the requests the fast path answers."""
    calls: list[int] = []
    real = fast_append._append

    async def counted(*args: Any) -> Any:
        calls.append(1)
        return await real(*args)

    monkeypatch.setattr(fast_append, "_append", counted)
    return calls


def answer(r: Any) -> tuple[int, list[tuple[str, str]], bytes]:
    return r.status_code, r.headers.multi_items(), r.content  # the headers in their order


async def both_ways(client: Client, body: bytes, calls: list[int], **kw: Any) -> tuple[Any, Any]:
    before = len(calls)
    fast = await client.post(PATH, content=body, **kw)
    assert len(calls) == before + 1, "the plain request was not answered by the fast path"
    slow = await client.post(FRAMEWORK, content=body, **kw)
    assert len(calls) == before + 1, "the request with a query string took the fast path"
    return fast, slow


def tampered() -> bytes:
    env = new_card("tampered")[1]
    sig = env.signatures[0]
    bad = dsse.Signature(keyid=sig.keyid, sig=sig.sig[:-4] + ("AAAA" if sig.sig[-4:] != "AAAA" else "BBBB"))
    return msgspec.json.encode(dsse.Envelope(env.payload, env.payloadType, [bad]))


BAD_BODIES = {
    "not json": b"{not json",
    "empty batch": b"[]",
    "nested too deep": b"[" * 100_000 + b"]" * 100_000,
    "not an envelope": b'{"payload": 1}',
    "bad signature": tampered(),
    "lone surrogate": b'{"payload": "\\ud800", "payloadType": "x", "signatures": []}',
    "empty body": b"",
}


@pytest.mark.parametrize("name", sorted(BAD_BODIES))
async def test_a_refused_append_gets_the_frameworks_answer(
    client: Client, fast_calls: list[int], name: str
) -> None:
    fast, slow = await both_ways(client, BAD_BODIES[name], fast_calls)
    assert fast.status_code >= 400
    assert answer(fast) == answer(slow)


async def test_new_and_duplicate_appends_answer_alike(client: Client, fast_calls: list[int]) -> None:
    one = msgspec.json.encode(new_card("one")[1])
    two = msgspec.json.encode(new_card("two")[1])
    first = await client.post(PATH, content=one)
    second = await client.post(FRAMEWORK, content=two)
    assert (first.status_code, second.status_code) == (201, 201)
    assert first.headers.multi_items() == second.headers.multi_items()  # same length too
    assert second.json()["entries"][0]["index"] == first.json()["entries"][0]["index"] + 1
    for body in (one, two, b"[" + one + b"," + two + b"]"):  # already logged: 200, the first indexes
        fast, slow = await both_ways(client, body, fast_calls)
        assert fast.status_code == 200 and fast.json()["entries"][0]["duplicate"] is True
        assert answer(fast) == answer(slow)


async def test_an_unexpected_error_is_a_logged_500_both_ways(
    client: Client, fast_calls: list[int], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async def broken(*args: Any, **kw: Any) -> Any:
        raise RuntimeError("the disk caught fire")

    service = client.app.state[STATE_KEY].log
    monkeypatch.setattr(service, "submit", broken)
    with caplog.at_level(logging.ERROR, logger="trustscore.api.problems"):
        fast, slow = await both_ways(client, msgspec.json.encode(new_card("x")[1]), fast_calls)
    assert fast.status_code == 500
    assert answer(fast) == answer(slow)
    assert "fire" not in fast.text
    assert sum("unhandled error on /v1/log/entries" in r.getMessage() for r in caplog.records) == 2


async def test_the_address_limit_refuses_alike_before_reading_the_body(
    settings: Settings, dsn: str, fast_calls: list[int]
) -> None:
    limited = replace(settings, address_rate_per_minute=1, address_burst=1)
    async with AsyncTestClient(app=create_app(limited, dsn)) as client:
        r = await client.post(PATH, content=msgspec.json.encode(new_card("first")[1]))
        assert r.status_code == 201, r.text
        fast, slow = await both_ways(client, msgspec.json.encode(new_card("second")[1]), fast_calls)
        assert fast.status_code == slow.status_code == 429
        assert sorted(fast.headers) == sorted(slow.headers) and "retry-after" in fast.headers
        assert fast.json().keys() == slow.json().keys()
        assert fast.json()["detail"] == slow.json()["detail"]
        # refused before the body is read: a body that is not even JSON gets the 429, not a 400
        fast, slow = await both_ways(client, b"{not json", fast_calls)
        assert fast.status_code == slow.status_code == 429


@pytest.mark.parametrize("host", ["a b", "x/y", 'x"y', "caf\u00e9.example", "h\tt"])
async def test_a_host_the_framework_refuses_is_refused_and_nothing_written(
    client: Client, fast_calls: list[int], host: str
) -> None:
    """Litestar's router refuses some Host values before routing; the fast path wrote such requests'
    entries (found by review). Any Host but a plain name or address goes to the framework."""
    before = await size(client)
    body = msgspec.json.encode(new_card("host")[1])
    headers = {"host": host.encode("utf-8")}
    r = await client.post(PATH, content=body, headers=headers)  # type: ignore[arg-type]
    assert r.status_code == 400 and r.json()["detail"] == "Invalid host header" and not fast_calls
    assert await size(client) == before


@pytest.mark.parametrize("host", ["bureau.example", "bureau.example:8443", "127.0.0.1:8080", "[::1]:80"])
async def test_a_plain_host_takes_the_fast_path(client: Client, fast_calls: list[int], host: str) -> None:
    r = await client.post(PATH, content=msgspec.json.encode(new_card("plain")[1]), headers={"host": host})
    assert r.status_code == 201 and fast_calls == [1]


@pytest.mark.parametrize(
    "headers",
    [
        {"origin": "https://evil.example"},
        {"sec-fetch-site": "cross-site"},
    ],
)
async def test_a_browsers_append_goes_to_the_framework(
    client: Client, fast_calls: list[int], headers: dict[str, str]
) -> None:
    r = await client.post(PATH, content=msgspec.json.encode(new_card("page")[1]), headers=headers)
    assert r.status_code == 403 and not fast_calls


async def test_a_chunked_or_oversized_body_goes_to_the_framework(
    settings: Settings, dsn: str, fast_calls: list[int]
) -> None:
    small = replace(settings, max_body_bytes=4096)
    async with AsyncTestClient(app=create_app(small, dsn)) as client:
        big = b"[" + b" " * 5000 + b"]"
        r = await client.post(PATH, content=big)
        assert r.status_code == 413 and "4096 bytes at most" in r.json()["detail"]

        body = msgspec.json.encode(new_card("chunked")[1])  # the test client sends no chunks: named only
        r = await client.post(PATH, content=body, headers={"transfer-encoding": "chunked"})
        assert r.status_code == 201, r.text
    assert not fast_calls


async def test_a_worker_serves_no_appends(tmp_path: Path, dsn: str, fast_calls: list[int]) -> None:
    worker = Settings(data_dir=tmp_path / "w", role="worker", integrate_interval=0.05)
    async with AsyncTestClient(app=create_app(worker, dsn)) as client:
        r = await client.post(PATH, content=msgspec.json.encode(new_card("w")[1]))
    assert r.status_code == 404 and not fast_calls


async def test_a_client_gone_before_its_body_is_answered_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Straight through the ASGI callable: the body never comes, so nothing is submitted or sent."""
    sent: list[Any] = []

    async def inner(scope: Any, receive: Any, send: Any) -> None:
        raise AssertionError("the plain append went to the framework")

    async def receive() -> Any:
        return {"type": "http.disconnect"}

    async def send(message: Any) -> None:
        sent.append(message)

    class Limiter:
        def check(self, address: str) -> None:
            pass

    class Log:
        async def submit(self, body: bytes, address: str) -> Any:
            raise AssertionError("submitted without a body")

    monkeypatch.setattr(fast_append, "log_service", lambda state: Log())
    handler = fast_append.fast_append(inner, State(), Limiter(), 1000)  # type: ignore[arg-type]
    scope = {
        "type": "http",
        "method": "POST",
        "path": PATH,
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-length", b"10")],
        "client": ("127.0.0.1", 1),
    }
    await handler(scope, receive, send)  # type: ignore[arg-type]
    assert sent == []
