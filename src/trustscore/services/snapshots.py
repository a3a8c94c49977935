"""Periodic server-signed snapshots of every rating, logged so reliability can measure reproducibility."""

from __future__ import annotations

import datetime as dt
import logging

import msgspec

from trustscore.kinds.snapshots import SnapshotRow, make_rating_snapshot
from trustscore.ledger import dsse, statements
from trustscore.ledger.keys import SigningKey
from trustscore.ledger.submission import prepare
from trustscore.services.log import LogService
from trustscore.services.ratings import RatingService
from trustscore.store.log import Appended

log = logging.getLogger(__name__)


#: Agents per snapshot statement. A statement holds at most ``MAX_ROWS`` rows, and an attestation
#: bundle carries the whole snapshot entries that mention its agent, so many agents are split over
#: several statements taken at the same time (the consistency term reads each agent's row alone).
ROWS_PER_STATEMENT = 1000


def snapshot_payloads(
    ratings: RatingService, key: SigningKey, taken_at: str, rows_per_statement: int = ROWS_PER_STATEMENT
) -> list[bytes]:
    """Statement bytes of one snapshot of every rated agent per served model, ``rows_per_statement``
    agents per statement (in agent order); none for a model without rated agents."""
    out = []
    for model, weights in sorted(ratings.models.items()):
        rows = [
            SnapshotRow(agent=r.rating.agent, total=r.rating.total, adjusted=r.rating.adjusted)
            for r in ratings.all(model)  # sorted by agent
        ]
        for start in range(0, len(rows), rows_per_statement):
            out.append(
                make_rating_snapshot(
                    signer=key.id,
                    model_version=model,
                    weights_digest=weights.digest,
                    log_size=ratings.size,
                    taken_at=taken_at,
                    ratings=rows[start : start + rows_per_statement],
                )
            )
    return out


async def take(log_service: LogService, ratings: RatingService, key: SigningKey) -> list[Appended]:
    """Log a snapshot of every rated agent under every served model, all in one transaction."""
    taken_at = statements.format_time(dt.datetime.now(dt.UTC))
    prepared = [
        prepare(msgspec.to_builtins(dsse.sign(payload, [key])))
        for payload in snapshot_payloads(ratings, key, taken_at)
    ]
    return await log_service.append(prepared) if prepared else []
