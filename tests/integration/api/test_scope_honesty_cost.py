"""An agent's card history costs a rating read nothing per version.

The rating response carries the agent's scope-honesty summary, computed from every card and scope sitting
about the agent (scope.report.from_leaves). Each read parsed all of them again, and a rating body is made
again whenever the log moves (or at every read, for an agent without evidence): an agent that logged
3,000 versions of its card (a minute at the per-signer allowance) made each read of its rating cost
70-110 ms of the API process's event loop. Now each service keeps each agent's collected history and
parses only what was logged since its last read (services/scope.py)."""

from __future__ import annotations

import asyncio
from typing import Any

import msgspec
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from tests.helpers import count_calls
from trustscore.api.wiring import STATE_KEY
from trustscore.cli.agent import card_envelope
from trustscore.ledger import keys
from trustscore.scope import report
from trustscore.services import scope as scope_service
from trustscore.services.scope import ScopeService

Client = AsyncTestClient[Litestar]
VERSIONS = 40


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> dict[str, int]:
    """Counts the leaves the scope service parses, per subject (not the projector's or other readers')."""
    counts: dict[str, int] = {}
    real = scope_service.statements_of  # type: ignore[attr-defined]

    def counted(leaves: list[tuple[int, bytes]]) -> Any:
        out = real(leaves)
        for _, stmt in out:
            counts[stmt.facts.subject] = counts.get(stmt.facts.subject, 0) + 1
        return out

    monkeypatch.setattr(scope_service, "statements_of", counted)
    return counts


async def _log_cards(client: Client, key: keys.SigningKey, names: list[str]) -> None:
    body = b"[" + b",".join(msgspec.json.encode(card_envelope(key, n)) for n in names) + b"]"
    r = await client.post("/v1/log/entries", content=body)
    assert r.status_code in (200, 201), r.text
    for _ in range(400):
        r = await client.get(f"/v1/agents/{key.id}")
        if r.status_code == 200 and r.json()["name"] == names[-1]:
            return
        await asyncio.sleep(0.05)
    raise AssertionError("the cards were not projected")


async def test_a_rating_read_parses_only_the_history_logged_since(
    client: Client, parsed: dict[str, int]
) -> None:
    key = keys.SigningKey.generate()
    await _log_cards(client, key, [f"version {i}" for i in range(VERSIONS)])
    first = (await client.get(f"/v1/agents/{key.id}/rating")).json()
    assert first["scope_honesty"]["tier"] is None  # no declarations: no score, with the reason
    parsed.clear()
    for path in ("rating", "rating", "scope-honesty"):
        r = await client.get(f"/v1/agents/{key.id}/{path}")
        assert r.status_code == 200, r.text
    assert parsed.get(key.id, 0) == 0, parsed  # the history is not parsed again
    await _log_cards(client, key, ["one more version"])
    parsed.clear()
    again = (await client.get(f"/v1/agents/{key.id}/rating")).json()
    # The new card at most (by this read, or earlier by the background renewal of the agent's kept body,
    # which a read starts when its stamp moved with the time alone: services/kept.py); never the history.
    assert parsed.get(key.id, 0) <= 1, parsed
    assert again["scope_honesty"] == first["scope_honesty"]
    view = (await client.get(f"/v1/agents/{key.id}/scope-honesty")).json()
    assert len(view["declarations"]) == 1  # versions that change no declaration are not listed


async def test_reads_of_keys_without_a_card_keep_nothing(client: Client) -> None:
    """A read of any string must not push real agents' folds out of the service's keeping."""
    key = keys.SigningKey.generate()
    await _log_cards(client, key, ["only version"])
    assert (await client.get(f"/v1/agents/{key.id}/scope-honesty")).status_code == 200
    scope = client.app.state[STATE_KEY].public.scope_summary.__self__
    assert isinstance(scope, ScopeService) and list(scope._kept) == [key.id]
    for _ in range(20):
        stranger = keys.SigningKey.generate().id
        assert (await client.get(f"/v1/agents/{stranger}/scope-honesty")).status_code == 404
    assert list(scope._kept) == [key.id] and scope._kept.weight == 1


async def test_the_kept_folds_are_bounded_by_what_they_hold(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    scope = client.app.state[STATE_KEY].public.scope_summary.__self__
    monkeypatch.setattr(scope._kept, "weight_limit", 2)  # card versions and runs, all agents together
    agents = [keys.SigningKey.generate() for _ in range(3)]
    for key in agents:
        await _log_cards(client, key, ["only version"])  # one card version each
        assert (await client.get(f"/v1/agents/{key.id}/scope-honesty")).status_code == 200
    assert list(scope._kept) == [a.id for a in agents[1:]] and scope._kept.weight == 2  # the oldest read went


async def test_the_view_is_prepared_once_while_the_history_stays(
    client: Client, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The attack: every read of ``GET /v1/agents/{id}/scope-honesty`` built the whole view from the
    agent's runs (~64 µs a run: 0.64 s for 10^4 runs), anyone's to repeat. Now the view but for the time
    is kept with the agent's fold: reads at the same history only add the time."""
    made = count_calls(monkeypatch, report, "_composites")
    key = keys.SigningKey.generate()
    await _log_cards(client, key, ["first"])
    views = []
    for _ in range(4):
        r = await client.get(f"/v1/agents/{key.id}/scope-honesty")
        assert r.status_code == 200, r.text
        views.append(r.json())
    assert made[0] <= 1, made  # before: one each read (and one for each rating body made)
    assert all({**v, "at": None} == {**views[0], "at": None} for v in views)
    await _log_cards(client, key, ["second"])  # the history moved: prepared again, once
    before = made[0]
    for _ in range(3):
        assert (await client.get(f"/v1/agents/{key.id}/scope-honesty")).status_code == 200
    assert made[0] - before <= 1, made
