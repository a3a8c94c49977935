"""Scheduled rating snapshots name their period (services/snapshots.py): the period the step started in,
not the one it ended in, so a slow step (a takeover that first loads every rating, a loaded machine)
still fills its own period; a second snapshot of a period is refused by the log, not written twice."""

from __future__ import annotations

import time
from typing import Any

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from tests.helpers import new_card
from tests.integration.api.test_attestations import on_app, post, public_of
from tests.integration.pages.test_pages_api import report
from trustscore.kinds.snapshots import RatingSnapshot
from trustscore.ledger import audit
from trustscore.services import logkey, snapshots
from trustscore.settings import Settings

Client = AsyncTestClient[Litestar]
HOUR = 3600.0


async def test_a_snapshot_names_the_period_its_step_started_in_and_each_period_has_one(
    client: Client, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    key, card = new_card("snapshotted")
    await post(client, "/v1/log/entries", card)
    await report(client, key)
    public, service = public_of(client), logkey.load_or_create(settings.service_key_file)
    # A step that started a few seconds before an hour's end and signs in the next hour.
    due = (time.time() // HOUR - 3) * HOUR + HOUR - 5
    first = await on_app(client, snapshots.take, public.log, public.ratings, service, HOUR, due)
    assert first, "a snapshot of a rated agent"
    signed: list[int] = []
    payloads = snapshots.snapshot_payloads

    def counted(*args: Any, **kwargs: Any) -> list[bytes]:
        signed.append(1)
        return payloads(*args, **kwargs)

    monkeypatch.setattr(snapshots, "snapshot_payloads", counted)
    again = await on_app(client, snapshots.take, public.log, public.ratings, service, HOUR, due + 4)
    assert again == [] and signed == []  # the same period: found taken before anything is signed
    following = await on_app(client, snapshots.take, public.log, public.ratings, service, HOUR, due + 6)
    assert following and min(a.index for a in following) > max(a.index for a in first)
    for appended, period in ((first, int(due // HOUR)), (following, int(due // HOUR) + 1)):
        for a in appended:
            [entry] = await on_app(client, public.log.store.entries, a.index, a.index + 1)
            predicate = audit.parse_leaf(entry.leaf).statement.predicate
            assert isinstance(predicate, RatingSnapshot)
            assert predicate.nonce.startswith(f"snapshot/3600s/{period}/")
            # signed now, whatever period it fills
            assert predicate.taken_at > time.strftime("%Y-%m-%dT%H", time.gmtime(due + HOUR))
