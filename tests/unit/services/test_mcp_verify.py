"""The MCP tool ``verify_attestation`` checked a bundle of up to 8 MiB (4 MiB over HTTP, the SDK's bound)
on the service's event loop: a 1,000-event bundle held every other request of the process up for ~0.3 s
(bench/attestations.py --mcp-verify), and a client calling it again and again held them up for good. It
now runs in a worker thread of its own, one at a time, and the verifications of one process hold at most
a budget of bundle bytes (a call that finds no room within its wait is a tool error saying the server is
busy)."""

from __future__ import annotations

import asyncio
import itertools
import time
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
    decode, raw = attestation.decode_bundle, mcp_tools._raw

    def decoding(data: bytes) -> Any:
        ran.append(f"decode in {where()}")
        return decode(data)

    def encoding(bundle: Any) -> bytes:
        ran.append(f"encode in {where()}")
        return raw(bundle)

    monkeypatch.setattr(attestation, "decode_bundle", decoding)
    monkeypatch.setattr(mcp_tools, "_raw", encoding)
    server = build_server(NoBureau())
    for bundle in ("not json", {"not": "a bundle"}):
        with pytest.raises(ToolError, match="not verified"):
            await server.call_tool("verify_attestation", {"bundle": bundle, "verifier_key": KEY})
    assert ran == ["encode in thread", "decode in thread"] * 2


def slowed(monkeypatch: pytest.MonkeyPatch, seconds: float) -> list[tuple[float, float]]:
    """Each check takes ``seconds`` (in its thread) and fails; the (start, end) of each, as it ran."""
    spans: list[tuple[float, float]] = []

    def slow(raw: bytes, key: str | None) -> Any:
        start = time.monotonic()
        time.sleep(seconds)
        spans.append((start, time.monotonic()))
        raise ToolError("not verified: slowed")

    monkeypatch.setattr(mcp_tools, "_verify_raw", slow)
    return spans


async def test_verifications_run_one_at_a_time_in_a_thread_of_their_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Not in the default thread pool, which the service's appends and attestation makings use."""
    spans = slowed(monkeypatch, 0.1)
    verifications = Verifications()
    calls = [verifications.verify("x" * 10, KEY) for _ in range(4)]
    pooled = asyncio.to_thread(time.monotonic)  # the default pool is free meanwhile
    *failed, at = await asyncio.gather(*calls, pooled, return_exceptions=True)
    assert all(isinstance(f, ToolError) for f in failed) and len(spans) == 4
    ordered = sorted(spans)
    assert all(a[1] <= b[0] for a, b in itertools.pairwise(ordered))  # never two at once
    assert isinstance(at, float) and at < ordered[-1][0]  # not queued behind them


async def test_a_caller_that_leaves_keeps_its_hold_until_its_check_ends(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    spans = slowed(monkeypatch, 0.3)
    verifications = Verifications()
    call = asyncio.ensure_future(verifications.verify("x" * 10, KEY))
    while verifications.budget.used == 0:
        await asyncio.sleep(0.01)
    call.cancel()
    await asyncio.sleep(0.05)
    assert not spans and verifications.budget.used == 10  # the thread runs on: its bytes are held
    with pytest.raises(asyncio.CancelledError):
        await call
    assert len(spans) == 1 and verifications.budget.used == 0


async def test_verifications_past_the_budget_wait_then_are_refused() -> None:
    verifications = Verifications(in_flight=100, max_wait=0.05)
    server = build_server(NoBureau(), verifications)
    async with verifications.budget.hold(100):  # another verification holds all of it
        with pytest.raises(ToolError, match="busy"):
            await server.call_tool("verify_attestation", {"bundle": "x" * 50, "verifier_key": KEY})
        with pytest.raises(ToolError, match="larger than"):  # too large: refused without waiting
            await server.call_tool(
                "verify_attestation", {"bundle": "x" * (mcp_tools.MAX_BUNDLE + 1), "verifier_key": KEY}
            )
    with pytest.raises(ToolError, match="not verified"):  # room again: it runs
        await server.call_tool("verify_attestation", {"bundle": "x" * 50, "verifier_key": KEY})
    assert verifications.budget.used == 0


async def test_a_bundle_that_is_not_text_is_one_line() -> None:
    server = build_server(NoBureau())
    for bundle in ("\ud800", {"a": "\ud800"}):
        with pytest.raises(ToolError, match="not JSON text"):
            await server.call_tool("verify_attestation", {"bundle": bundle, "verifier_key": KEY})
