"""Periodic server-signed snapshots of every rating, logged so reliability can measure reproducibility.

A scheduled snapshot belongs to a period (wall-clock multiples of the snapshot interval) and its
statements' nonces name that period, so the log itself refuses a second snapshot of the same period
(a replayed nonce), whichever process takes it and however a failover interleaves: one per period,
however many workers (docs/operations.md, "Roles and leases")."""

from __future__ import annotations

import datetime as dt
import logging

import msgspec

from trustscore.errors import NonceReplay
from trustscore.kinds.snapshots import SnapshotRow, make_rating_snapshot
from trustscore.ledger import dsse, statements
from trustscore.ledger.keys import SigningKey
from trustscore.ledger.submission import prepare
from trustscore.services.log import LogService
from trustscore.services.periodic import period_of
from trustscore.services.ratings import RatingView
from trustscore.store.log import Appended

log = logging.getLogger(__name__)


#: Agents per snapshot statement. A statement holds at most ``MAX_ROWS`` rows, and an attestation
#: bundle carries the whole snapshot entries that mention its agent, so many agents are split over
#: several statements taken at the same time (the consistency term reads each agent's row alone). Every
#: rated agent's bundle under a model that reads its snapshots (baseline-v0.3; not trustscore-v2 or v3)
#: carries one such entry per snapshot interval, and is refused past 32
#: MiB (services/attestations.py): at 1,000 rows a leaf was 113,008 bytes and a bundle of an hourly
#: snapshotted agent passed the bound in about 9 days; at 100, 12,208 bytes (~17.5 KB in the bundle with
#: its proof), about 80 days, for ~8 % more snapshot bytes in the log (122 against 113 bytes an agent).
ROWS_PER_STATEMENT = 100


def period_nonce(interval: float, at: float) -> str:
    """The nonce prefix of the snapshot of the period of ``interval`` seconds that ``at`` falls in."""
    return f"snapshot/{interval:g}s/{period_of(interval, at)}"


def snapshot_payloads(
    ratings: RatingView,
    key: SigningKey,
    taken_at: str,
    rows_per_statement: int = ROWS_PER_STATEMENT,
    nonce: str | None = None,
) -> list[bytes]:
    """Statement bytes of one snapshot of every rated agent per served model, ``rows_per_statement``
    agents per statement (in agent order); none for a model without rated agents. With ``nonce``, each
    statement's nonce is it plus the model and the first row (random otherwise)."""
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
                    nonce=None if nonce is None else f"{nonce}/{model}/{start}",
                )
            )
    return out


async def take(
    log_service: LogService,
    ratings: RatingView,
    key: SigningKey,
    interval: float | None = None,
    due: float | None = None,
) -> list[Appended]:
    """Log a snapshot of every rated agent under every served model, all in one transaction. With
    ``interval``, it is the snapshot of the period ``due`` falls in (default now: the scheduled step
    passes the time it started, so a step that ends in the next period still fills its own): none if that
    period has one already. ``taken_at`` is always the time of signing."""
    now = dt.datetime.now(dt.UTC)
    nonce = None if interval is None else period_nonce(interval, now.timestamp() if due is None else due)
    # Every snapshot of a period has a first statement per model it rates: if one is logged, the period
    # has its snapshot; looked up first, so that a restart or takeover signs nothing for nothing.
    if nonce is not None and await log_service.store.any_nonce_used(
        key.id, [f"{nonce}/{model}/0" for model in ratings.models]
    ):
        log.info("snapshot of period %s: already taken", nonce)
        return []
    prepared = [
        prepare(msgspec.to_builtins(dsse.sign(payload, [key])))
        for payload in snapshot_payloads(ratings, key, statements.format_time(now), nonce=nonce)
    ]
    if not prepared:
        return []
    try:
        return await log_service.append(prepared)
    except NonceReplay:
        log.info("snapshot of period %s: already taken", nonce)
        return []
