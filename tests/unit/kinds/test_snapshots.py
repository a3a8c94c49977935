"""Rating snapshots: signed by the service's snapshot key, rows sorted and pinned by the subject."""

from __future__ import annotations

import hashlib

import pytest

from tests.unit.evidence.signed import DIGEST, T0, Log, new_id, predicate_update, refused
from trustscore import canonical
from trustscore.errors import InvalidInput, SignatureError
from trustscore.kinds.snapshots import (
    RATING_SNAPSHOT,
    SNAPSHOT_SUBJECT,
    SnapshotRow,
    make_rating_snapshot,
)


def _snapshot(signer: str, rows: list[SnapshotRow]) -> bytes:
    return make_rating_snapshot(
        signer=signer,
        model_version="trustscore-v1",
        weights_digest=DIGEST,
        log_size=10,
        taken_at=T0,
        ratings=rows,
    )


def test_snapshot_is_signed_by_its_signer_and_pins_its_rows() -> None:
    log = Log()
    svc = log.service("snapshots", ["snapshot"])
    a, b = sorted([new_id(), new_id()])
    rows = [SnapshotRow(agent=b, total=None, adjusted=None), SnapshotRow(agent=a, total=700, adjusted=650)]
    entry = log.entries[log.submit(_snapshot(svc.id, rows), svc)]
    assert entry.kind == RATING_SNAPSHOT.predicate_type
    assert (entry.signer, entry.subject) == (svc.id, SNAPSHOT_SUBJECT)
    ordered = sorted(rows, key=lambda r: r.agent)
    digest = hashlib.sha256(canonical.encode(ordered)).hexdigest()
    assert entry.statement.statement.subject[0].digest == {"sha256": digest}
    other = log.party("x")
    with pytest.raises(SignatureError, match=f"must be signed by {svc.id}"):
        log.submit(_snapshot(svc.id, rows), other)


def test_an_empty_snapshot_is_allowed() -> None:
    _snapshot(new_id(), [])


def _row(agent: str, total: object = 500, adjusted: object = 400) -> dict[str, object]:
    return {"agent": agent, "total": total, "adjusted": adjusted}


A, B = sorted([new_id(), new_id()])


@pytest.mark.parametrize(
    ("fields", "words"),
    [
        ({"signer": "svc"}, "signer"),
        ({"model_version": ""}, "model_version"),
        ({"weights_digest": "xyz"}, "weights_digest"),
        ({"log_size": -1}, "log_size"),
        ({"taken_at": "2026-03-01"}, "taken_at"),
        ({"ratings": [_row("nobody")]}, "agent"),
        ({"ratings": [_row(A, total=1001)]}, "total"),
        ({"ratings": [_row(A, adjusted=-5)]}, "adjusted"),
        ({"ratings": [_row(A, total=50.5)]}, "total"),
        ({"ratings": [_row(B), _row(A)]}, "sorted"),
        ({"ratings": [_row(A), _row(A)]}, "sorted"),
        ({"ratings": [{"agent": A, "total": 1}]}, "adjusted"),
        ({"grade": "AAA"}, "grade"),
    ],
)
def test_snapshot_fields_are_checked(fields: dict[str, object], words: str) -> None:
    refused(
        _snapshot(new_id(), [SnapshotRow(agent=A, total=1, adjusted=1)]),
        predicate_update(**fields),
        InvalidInput,
        words,
    )


def test_snapshot_subject_must_match_the_rows() -> None:
    payload = _snapshot(new_id(), [SnapshotRow(agent=A, total=1, adjusted=1)])
    refused(payload, predicate_update(ratings=[_row(A, total=2, adjusted=1)]), InvalidInput, "subject")
    refused(payload, lambda s: s["subject"][0].update(name="snapshot"), InvalidInput, "subject")
