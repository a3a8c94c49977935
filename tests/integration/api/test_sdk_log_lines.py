"""A client's malformed JSON-RPC request costs the server one bounded log line.

The MCP and A2A SDKs mounted at /mcp and /a2a log a malformed request at ERROR with its traceback and
its content: a review measured log lines of 820 KB for an 826 KB request to /a2a/ (2,000 long extra
keys), 904 KB for a long `historyLength`, and 102 KB for `prompts/get` with a 50,000-character name
(the bodies may be 1 MiB and 4 MiB): about 2 MB of log per request. The service's log handler keeps
their records to one line of at most :data:`trustscore.logs.MAX_SDK_MESSAGE` characters.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from trustscore import logs

Client = AsyncTestClient[Litestar]
JSON = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


@pytest.fixture
def logged(monkeypatch: pytest.MonkeyPatch) -> Iterator[io.StringIO]:
    """The service's log configuration (as `trustscore serve` makes it), writing JSON lines here."""
    out = io.StringIO()
    monkeypatch.setattr("sys.stderr", out)
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    logs.configure("info", "json")
    try:
        yield out
    finally:
        root.handlers[:], root.level = handlers, level


def _lines(out: io.StringIO) -> list[dict[str, object]]:
    return [json.loads(line) for line in out.getvalue().splitlines() if line.strip()]


async def test_a_malformed_a2a_request_logs_a_bounded_line(client: Client, logged: io.StringIO) -> None:
    padding = {f"k{i}": "x" * 400 for i in range(2_000)}  # ~820 KB, under the mount's 1 MiB
    r = await client.post("/a2a/", content=json.dumps({**padding}), headers=JSON)
    assert r.status_code < 500, r.text
    sdk = [line for line in _lines(logged) if str(line["logger"]).startswith("a2a")]
    assert sdk, logged.getvalue()[:2000]  # the SDK did log it (else this test tests nothing)
    for line in sdk:
        assert "exc" not in line and len(json.dumps(line)) < 2 * logs.MAX_SDK_MESSAGE, str(line)[:300]


async def test_an_unknown_mcp_prompt_logs_a_bounded_line(client: Client, logged: io.StringIO) -> None:
    init = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    first = await client.post("/mcp/", json=init, headers=JSON)
    assert first.status_code == 200, first.text
    session = {k: v for k, v in first.headers.items() if k.lower() == "mcp-session-id"}
    ask = {"jsonrpc": "2.0", "id": 1, "method": "prompts/get", "params": {"name": "p" * 50_000}}
    r = await client.post("/mcp/", json=ask, headers={**JSON, **session})
    assert r.status_code < 500, r.text
    sdk = [line for line in _lines(logged) if str(line["logger"]).startswith("mcp")]
    assert sdk, logged.getvalue()[:2000]
    for line in sdk:
        assert "exc" not in line and len(json.dumps(line)) < 2 * logs.MAX_SDK_MESSAGE, str(line)[:300]
