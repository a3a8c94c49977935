"""The rating snapshot: the server's signed, periodic record of every agent's rating.

Ratings are a pure function of the log prefix [0, ``log_size``) and the weights file named by
``model_version`` and ``weights_digest``, so anyone can recompute a snapshot and compare. Snapshots feed
reliability (score reproducibility) and weight counterparty reports by the reporter's own rating.

Subject: ``[{"name": "trustscore:snapshot", "digest": {"sha256": SHA-256 hex of the canonical JSON of
ratings}}]``, which pins exactly the rows the snapshot carries.
"""

from __future__ import annotations

import hashlib
import itertools

import msgspec

from trustscore import canonical
from trustscore.errors import InvalidInput
from trustscore.kinds.parties import check_key_id, check_sha256_hex, new_nonce, now
from trustscore.ledger import statements
from trustscore.ledger.statements import Facts, Kind, Predicate, Statement, Subject, check_text, register

SNAPSHOT_SUBJECT = "trustscore:snapshot"
MAX_TOTAL = 1000
MAX_ROWS = 100_000


class SnapshotRow(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    agent: str  # key id
    total: int | None  # 0..1000, null when the agent has no rating
    adjusted: int | None  # 0..1000, the freshness-adjusted total, null likewise


class RatingSnapshot(Predicate, kw_only=True, frozen=True):
    signer: str  # key id of the service's snapshot key
    model_version: str
    weights_digest: str  # SHA-256 hex of the weights file's bytes
    log_size: int  # ratings are computed from entries [0, log_size)
    taken_at: str
    ratings: list[SnapshotRow]  # sorted by agent, each agent once


def snapshot_subject(ratings: list[SnapshotRow]) -> Subject:
    return Subject(
        name=SNAPSHOT_SUBJECT, digest={"sha256": hashlib.sha256(canonical.encode(ratings)).hexdigest()}
    )


def _check_row(row: SnapshotRow) -> None:
    check_key_id(row.agent, what="ratings[].agent")
    for field, value in (("total", row.total), ("adjusted", row.adjusted)):
        if value is not None and not 0 <= value <= MAX_TOTAL:
            raise InvalidInput(f"ratings[{row.agent}].{field} must be 0..{MAX_TOTAL} or null")


def _check(stmt: Statement, s: RatingSnapshot) -> Facts:
    check_key_id(s.signer, what="signer")
    check_text(s.model_version, what="model_version")
    check_sha256_hex(s.weights_digest, what="weights_digest")
    if s.log_size < 0:
        raise InvalidInput("log_size must be >= 0")
    statements.parse_time(s.taken_at, what="taken_at")
    if len(s.ratings) > MAX_ROWS:
        raise InvalidInput(f"ratings: at most {MAX_ROWS} rows")
    for row in s.ratings:
        _check_row(row)
    agents = [row.agent for row in s.ratings]
    if any(a >= b for a, b in itertools.pairwise(agents)):
        raise InvalidInput("ratings must be sorted by agent, each agent once")
    if stmt.subject != [snapshot_subject(s.ratings)]:
        raise InvalidInput(f"snapshot subject must be {SNAPSHOT_SUBJECT!r} and the SHA-256 of ratings")
    return Facts(signer=s.signer, subject=SNAPSHOT_SUBJECT)


RATING_SNAPSHOT = register(Kind(name="rating-snapshot", version=1, struct=RatingSnapshot, check=_check))


def make_rating_snapshot(
    *,
    signer: str,
    model_version: str,
    weights_digest: str,
    log_size: int,
    taken_at: str,
    ratings: list[SnapshotRow],
    nonce: str | None = None,
    issued_at: str | None = None,
) -> bytes:
    """Checked statement bytes of a rating snapshot (rows are sorted here); sign with the snapshot key."""
    rows = sorted(ratings, key=lambda r: r.agent)
    s = RatingSnapshot(
        nonce=nonce or new_nonce(),
        issued_at=issued_at or now(),
        signer=signer,
        model_version=model_version,
        weights_digest=weights_digest,
        log_size=log_size,
        taken_at=taken_at,
        ratings=rows,
    )
    payload = statements.make_statement(RATING_SNAPSHOT, snapshot_subject(rows), s)
    statements.parse_statement(payload)
    return payload
