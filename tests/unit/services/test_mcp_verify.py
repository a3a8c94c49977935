"""The MCP tool ``verify_attestation`` checked a bundle of up to 8 MiB (4 MiB over HTTP, the SDK's bound)
on the service's event loop: a 1,800-event bundle held every other request of the process up for ~0.3 s
(bench/attestations.py --mcp-verify), and a client calling it again and again held them up for good. It
now runs in a worker thread, and the verifications of one process hold at most a budget of bundle bytes
at once (a call that finds no room within its wait is a tool error saying the server is busy)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from trustscore.attestations import rating as attestation
from trustscore.services import mcp_tools
from trustscore.services.mcp_tools import Verifications, build_server

KEY = "trustscore.local/log+00000000+AAAA"


class NoBureau:
    """A bureau the verification never asks (the key is given)."""

    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"the bureau was asked {name}")


def where() -> str:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return "thread"
    return "event loop"


async def test_a_verification_runs_off_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    ran: list[str] = []
    decode = attestation.decode_bundle

    def recording(raw: bytes) -> Any:
        ran.append(where())
        return decode(raw)

    monkeypatch.setattr(attestation, "decode_bundle", recording)
    server = build_server(NoBureau())
    for bundle in ("not json", {"not": "a bundle"}):
        with pytest.raises(ToolError, match="not verified"):
            await server.call_tool("verify_attestation", {"bundle": bundle, "verifier_key": KEY})
    assert ran == ["thread", "thread"]


async def test_verifications_past_the_budget_wait_then_are_refused() -> None:
    verifications = Verifications(in_flight=100, max_wait=0.05)
    server = build_server(NoBureau(), verifications)
    async with verifications.budget.hold(100):  # another verification holds all of it
        with pytest.raises(ToolError, match="busy"):
            await server.call_tool("verify_attestation", {"bundle": "x" * 50, "verifier_key": KEY})
    with pytest.raises(ToolError, match="not verified"):  # room again: it runs
        await server.call_tool("verify_attestation", {"bundle": "x" * 50, "verifier_key": KEY})
    assert verifications.budget.used == 0


async def test_a_bundle_larger_than_the_tool_reads_is_refused_before_any_work() -> None:
    verifications = Verifications()
    server = build_server(NoBureau(), verifications)
    with pytest.raises(ToolError, match="larger than"):
        await server.call_tool(
            "verify_attestation", {"bundle": "x" * (mcp_tools.MAX_BUNDLE + 1), "verifier_key": KEY}
        )
    assert verifications.budget.used == 0
