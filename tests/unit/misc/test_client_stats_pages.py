"""The client's outcome stats (``trustscore stats --server``): every page, of one tally, and a server
whose pages do not end is refused."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from trustscore import client as client_module
from trustscore.client import LogClient
from trustscore.errors import TrustscoreError

GROUPS = [f"g{i:02d}" for i in range(7)]


def _page(after: str | None, size: int, limit: int = 3) -> dict[str, Any]:
    start = 0 if after is None else next((i for i, g in enumerate(GROUPS) if g > after), len(GROUPS))
    names = GROUPS[start : start + limit]
    more = start + limit < len(GROUPS)
    return {"group_by": "model", "floor": 1, "verified_rung": 3, "rules": [], "log_size": size,
            "groups": [{"group": g, "stats": {"n": 1}} for g in names], "next": names[-1] if more else None}  # fmt: skip


def _client(handler: Any) -> LogClient:
    return LogClient("http://log.test", transport=httpx.MockTransport(handler))


def test_every_page_is_gathered_from_the_first_pages_tally() -> None:
    asked: list[dict[str, str]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        params = dict(request.url.params)
        asked.append(params)
        return httpx.Response(200, json=_page(params.get("after"), int(params.get("log_size", 40))))

    answer = _client(handler).outcome_stats("model", 1)
    assert [g["group"] for g in answer["groups"]] == GROUPS and answer["next"] is None
    assert answer["log_size"] == 40 and "log_size" not in asked[0]
    assert all(p["log_size"] == "40" for p in asked[1:]) and len(asked) == 3


def test_a_tally_gone_between_pages_starts_the_paging_again() -> None:
    calls = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        params = dict(request.url.params)
        if calls == 2:  # the first walk's second page: its tally is no longer kept
            return httpx.Response(409, json={"title": "Conflict", "detail": "ask for the first page again"})
        return httpx.Response(200, json=_page(params.get("after"), 41))

    answer = _client(handler).outcome_stats("model")
    assert [g["group"] for g in answer["groups"]] == GROUPS and calls == 1 + 1 + 3


def test_pages_that_do_not_move_forward_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={**_page(None, 1), "next": "a"})  # always the same page

    with pytest.raises(TrustscoreError, match="do not move forward"):
        _client(handler).outcome_stats("model")
    monkeypatch.setattr(client_module, "STATS_ATTEMPTS", 2)

    def gone(request: httpx.Request) -> httpx.Response:
        params = dict(request.url.params)
        if "after" in params:
            return httpx.Response(409, json={"title": "Conflict", "detail": "gone"})
        return httpx.Response(200, json=_page(None, 1))

    with pytest.raises(TrustscoreError, match="2 times"):
        _client(gone).outcome_stats("model")
