"""Periodic server-signed snapshots of every rating, logged so reliability can measure reproducibility."""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging

import msgspec

from trustscore.ledger import dsse, statements
from trustscore.ledger.keys import SigningKey
from trustscore.ledger.snapshots import SnapshotRow, make_rating_snapshot
from trustscore.ledger.submission import prepare
from trustscore.services.log import LogService
from trustscore.services.ratings import RatingService
from trustscore.store.log import Appended

log = logging.getLogger(__name__)


async def take(log_service: LogService, ratings: RatingService, key: SigningKey) -> list[Appended]:
    """Log one snapshot per served model of every rated agent; nothing when no agent is rated."""
    taken_at = statements.format_time(dt.datetime.now(dt.UTC))
    prepared = []
    for model, weights in sorted(ratings.models.items()):
        rows = [
            SnapshotRow(agent=r.rating.agent, total=r.rating.total, adjusted=r.rating.adjusted)
            for r in ratings.all(model)
        ]
        if not rows:
            continue
        payload = make_rating_snapshot(
            signer=key.id,
            model_version=model,
            weights_digest=weights.digest,
            log_size=ratings.size,
            taken_at=taken_at,
            ratings=rows,
        )
        prepared.append(prepare(msgspec.to_builtins(dsse.sign(payload, [key]))))
    return await log_service.append(prepared) if prepared else []


async def run(
    log_service: LogService, ratings: RatingService, key: SigningKey, interval: float, stop: asyncio.Event
) -> None:
    while not stop.is_set():
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval)
        if stop.is_set():
            return
        try:
            await take(log_service, ratings, key)
        except Exception:
            log.exception("snapshot failed; will retry")
