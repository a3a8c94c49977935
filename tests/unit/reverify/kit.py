"""Test kit: re-verification statements built with the real builder."""

from __future__ import annotations

import hashlib
from typing import Any

from trustscore.kinds.reverification import PrivateItem, Reverification, ReverifiedItem, make_reverification
from trustscore.kinds.reverification.security import SecurityState
from trustscore.ledger import keys, statements

T0 = "2026-03-01T12:00:00.000000Z"
ROOT = hashlib.sha256(b"root").digest()
REPORT_SHA = hashlib.sha256(b"report").digest()
VERIFIER = keys.SigningKey.from_seed(b"\x01" * 32)
AGENT = keys.SigningKey.from_seed(b"\x02" * 32)


def item(item_id: str, reported: int, observed: int | None, dimension: str = "capability") -> ReverifiedItem:
    from trustscore.kinds.reverification.compare import item_matches

    return ReverifiedItem(
        item_id=item_id,
        dimension=dimension,
        reported_millis=reported,
        observed_millis=observed,
        matched=item_matches(reported, observed),
        error=None if observed is not None else "no answer within 5 s",
    )


def private(item_id: str, value: int | None, dimension: str = "security") -> PrivateItem:
    result: Any = "failure" if value is None or value == 0 else ("success" if value == 1000 else "partial")
    return PrivateItem(
        exam="probe@1",
        exam_digest="sha256:" + "cd" * 32,
        item_id=item_id,
        dimension=dimension,
        grader="injection@1",
        value_millis=value,
        result=result,
        error=None if value is not None else "refused",
    )


def matching(n: int = 10, observed: int = 1000, prefix: str = "i") -> list[ReverifiedItem]:
    return [item(f"{prefix}-{n_}", 1000, observed) for n_ in range(n)]


def payload(
    items: list[ReverifiedItem] | None = None,
    private_items: list[PrivateItem] | None = None,
    before: SecurityState | None = None,
    **kw: Any,
) -> bytes:
    fields: dict[str, Any] = {
        "verifier": VERIFIER.id,
        "agent": AGENT.id,
        "report_index": 5,
        "report_sha256": REPORT_SHA.hex(),
        "exam": "capability",
        "exam_version": 1,
        "exam_digest": "sha256:" + "ab" * 32,
        "endpoint": "https://agent.example/ask",
        "trigger": "report",
        "checkpoint_size": 7,
        "checkpoint_root": ROOT,
        "ran_at": T0,
    }
    fields.update(kw)
    return make_reverification(
        items=matching() if items is None else items,
        private_items=private_items or [],
        security_before=before or SecurityState(),
        **fields,
    )


def statement(*args: Any, **kw: Any) -> Reverification:
    r = statements.parse_statement(payload(*args, **kw)).predicate
    assert isinstance(r, Reverification)
    return r
