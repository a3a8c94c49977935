"""A client address's request bodies are charged by their bytes, not only by the entries they write.

Before, a body cost its address one token whatever its size: a refused write costs one token, and an
entry route only checks that one is left before its body is read. One address could send the largest
body the app takes (16 MiB by default) a hundred times a second at the default allowance, each read and
parsed on the event loop (~120 ms of CPU for 16 MiB of small integers, bench/README.md): the process's
core kept busy by one client. Bodies now also spend a second allowance of the address, in bytes (BODY_BYTES_PER_ENTRY per
entry of the entries' allowance, its burst at least the largest body), charged when first read: a declared length whole, a chunked body chunk by chunk."""

from __future__ import annotations

from pathlib import Path

import pytest
from litestar.testing import AsyncTestClient

from tests.helpers import count_calls
from tests.integration.api.test_route_body_limits import _chunked
from trustscore.api.app import create_app
from trustscore.api.body_allowance import BODY_BYTES_PER_ENTRY
from trustscore.services.log import LogService
from trustscore.settings import Settings

BODY = 256 * 1024  # the app's limit here


def _settings(tmp_path: Path, rate: int = 60, burst: int = 8) -> Settings:
    # 8 entries of burst: 8 * BODY_BYTES_PER_ENTRY bytes of bodies at once, refilled at 1 entry a second
    return Settings(
        data_dir=tmp_path / "data",
        integrate_interval=0.05,
        max_body_bytes=BODY,
        address_rate_per_minute=rate,
        address_burst=burst,
    )


async def test_large_bodies_spend_the_addresses_byte_allowance(
    tmp_path: Path, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsed = count_calls(monkeypatch, LogService, "parse_body")
    allowance = 8 * BODY_BYTES_PER_ENTRY
    fits = allowance // BODY
    async with AsyncTestClient(app=create_app(_settings(tmp_path), dsn)) as client:
        # A body refused for its declared size is never read: it costs no bytes.
        for _ in range(3 * fits):
            r = await client.post("/v1/events", content=b" " * BODY)
            assert r.status_code == 413, r.text
        statuses = []
        for _ in range(fits + 2):
            statuses.append((await client.post("/v1/log/entries", content=b"[" * BODY)).status_code)
        # (the entries' burst of 8 is not what refuses: each refused body costs one entry token)
        assert statuses == [400] * fits + [429, 429], statuses
        assert parsed[0] == fits
        r = await client.post("/v1/log/entries", content=b"[" * BODY)
        assert r.status_code == 429 and r.headers["content-type"].startswith("application/problem+json")
        assert int(r.headers["retry-after"]) >= 1


async def test_the_byte_allowance_refuses_a_body_before_it_is_parsed(
    tmp_path: Path, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An address of a large entry allowance but few bytes left: its body is refused unparsed, whether
    its length is declared or it comes chunked, on an entry route, another POST and a mounted app."""
    parsed = count_calls(monkeypatch, LogService, "parse_body")
    # bytes: 60 * BODY_BYTES_PER_ENTRY at once, refilled at BODY_BYTES_PER_ENTRY a second
    settings = _settings(tmp_path, rate=60, burst=60)
    async with AsyncTestClient(app=create_app(settings, dsn)) as client:
        spent = 0
        while spent < 60 * BODY_BYTES_PER_ENTRY:  # spend the bytes with bodies of blanks (400 each)
            r = await client.post("/v1/log/entries", content=b" " * BODY)
            spent += BODY
            assert r.status_code == 400, r.text
        before = parsed[0]
        for path in ("/v1/log/entries", "/v1/settlements", "/v1/sittings/7/dialogue", "/mcp/", "/a2a/"):
            r = await client.post(path, content=b" " * BODY, headers={"content-type": "application/json"})
            assert r.status_code == 429, (path, r.text)
            assert r.headers["content-type"].startswith("application/problem+json"), path
            assert "bytes" in r.json()["detail"], r.json()
            status, read = await _chunked(client.app, path, host="testclient")
            # refused at its first chunk of 64 KiB, or soon after if a second of refill passed meanwhile
            assert status == 429 and read <= 3, (path, status, read)
        assert parsed[0] == before
        # A request without a body costs no bytes.
        assert (await client.get("/healthz")).status_code == 200


async def test_a_rate_of_zero_turns_the_byte_allowance_off(tmp_path: Path, dsn: str) -> None:
    async with AsyncTestClient(app=create_app(_settings(tmp_path, rate=0), dsn)) as client:
        for _ in range(8 * BODY_BYTES_PER_ENTRY // BODY + 4):
            r = await client.post("/v1/log/entries", content=b" " * BODY)
            assert r.status_code == 400, r.text


async def test_a_chunked_body_pays_for_every_chunk(
    tmp_path: Path, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fresh address sends chunked bodies of 192 KiB and a byte (the first chunk one byte): its 3.75 MiB
    of burst pays about 20 of them, not 40 (the first version charged the first chunk only; review)."""
    parsed = count_calls(monkeypatch, LogService, "parse_body")
    async with AsyncTestClient(app=create_app(_settings(tmp_path, rate=60, burst=60), dsn)) as client:
        sizes = [1, 65536, 65536, 65536]
        statuses = [(await _chunked(client.app, "/v1/log/entries", "10.9.9.9", sizes))[0] for _ in range(40)]
    assert statuses.count(400) == parsed[0] <= 24 and statuses.count(429) >= 16, statuses
