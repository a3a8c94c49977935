"""Test kit: real keys, real DSSE envelopes, and a tiny in-memory log that checks them like the server."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from trustscore import canonical
from trustscore.evidence.standing import REPORTER_MODEL, Standing
from trustscore.kinds import catalog as kinds_all
from trustscore.kinds.events import make_event
from trustscore.kinds.graded import GradedItem, Tier, make_graded_evidence
from trustscore.kinds.parties import PartyRole, make_party_card
from trustscore.kinds.service_card import ServiceRole, make_service_card
from trustscore.kinds.settlements import make_settlement
from trustscore.kinds.snapshots import SnapshotRow, make_rating_snapshot
from trustscore.ledger import dsse, keys, statements
from trustscore.ledger.submission import CheckedEntry, check, prepare

assert kinds_all.ALL_KINDS  # every kind registered

T0 = "2026-03-01T12:00:00.000000Z"
T1 = "2026-03-02T12:00:00.000000Z"
T2 = "2026-03-03T12:00:00.000000Z"
DIGEST = "ab" * 32


class TrustAll(Standing):
    """The standing policy with every reporter in good standing: for tests of the mapping itself."""

    def has_standing(self, reporter: str, before_index: int) -> bool:
        return True


class Log:
    """Entries in order; keys registered by cards resolve for later statements."""

    def __init__(self) -> None:
        self.keys: dict[str, bytes] = {}
        self.entries: list[CheckedEntry] = []

    def append(self, envelope: dsse.Envelope) -> CheckedEntry:
        entry = check(prepare(msgspec.to_builtins(envelope)), self.keys.get)
        if entry.introduces_key is not None:
            self.keys.setdefault(entry.signer, entry.introduces_key)
        self.entries.append(entry)
        return entry

    def submit(self, payload: bytes, *signers: keys.SigningKey) -> int:
        self.append(dsse.sign(payload, list(signers)))
        return len(self.entries) - 1

    def party(self, name: str, role: PartyRole = "counterparty") -> keys.SigningKey:
        key = keys.SigningKey.generate()
        self.submit(make_party_card(key.public_key, name, role), key)
        return key

    def service(self, name: str, roles: list[ServiceRole]) -> keys.SigningKey:
        key = keys.SigningKey.generate()
        self.submit(make_service_card(key.public_key, name, roles), key)
        return key

    def parsed(self) -> list[tuple[int, statements.ParsedStatement]]:
        return [(i, e.statement) for i, e in enumerate(self.entries)]


def checked(payload: bytes, *signers: keys.SigningKey, known: dict[str, bytes] | None = None) -> CheckedEntry:
    """Sign ``payload`` and check the envelope as the server would, with ``known`` registered keys."""
    env = dsse.sign(payload, list(signers))
    return check(prepare(msgspec.to_builtins(env)), (known or {}).get)


def refused(
    payload: bytes, mutate: Callable[[dict[str, Any]], object], exc: type[Exception], words: str
) -> None:
    """Mutate the statement JSON of ``payload`` and expect parsing it to raise ``exc`` matching ``words``."""
    stmt = json.loads(payload)
    mutate(stmt)
    with pytest.raises(exc, match=words):
        statements.parse_statement(json.dumps(stmt).encode())


def predicate_update(**fields: object) -> Callable[[dict[str, Any]], object]:
    return lambda s: s["predicate"].update(fields)


def new_id() -> str:
    return keys.SigningKey.generate().id


def payload_of(envelope: dsse.Envelope) -> bytes:
    return canonical.b64decode(envelope.payload)


def graded(agent: str, tier: Tier = "public", **kw: Any) -> bytes:
    fields: dict[str, Any] = {
        "grader": new_id(),
        "report_index": 0,
        "report_sha256": DIGEST,
        "exam": "capability",
        "exam_version": 2,
        "exam_digest": "sha256:" + "cd" * 32,
        "graded_at": T0,
        "items": [
            GradedItem(
                item_id="c1", dimension="capability", grader="exact@1", value_millis=850, result="success"
            ),
            GradedItem(
                item_id="i1", dimension="integrity", grader="honesty@1", value_millis=0, result="failure"
            ),
        ],
    }
    fields.update(kw)
    return make_graded_evidence(agent=agent, tier=tier, **fields)


def settlement(seller: str, buyer: str, **kw: Any) -> bytes:
    fields: dict[str, Any] = {"deal_id": "d1", "reporter_role": "buyer", "settled_at": T0}
    fields.update(kw)
    return make_settlement(seller=seller, buyer=buyer, **fields)


def busy_log() -> Log:
    """Parties, a marketplace and a service; settlements before and after a snapshot; an event; grades."""
    log = Log()
    seller, buyer = log.party("seller"), log.party("buyer")
    market = log.party("market", "marketplace")
    svc = log.service("svc", ["grader", "snapshot"])
    log.submit(settlement(seller.id, buyer.id, delivery="pass", confirmed=True), buyer)
    rows = sorted(
        [
            SnapshotRow(agent=buyer.id, total=800, adjusted=600),
            SnapshotRow(agent=seller.id, total=400, adjusted=None),
        ],
        key=lambda r: r.agent,
    )
    snapshot = make_rating_snapshot(
        signer=svc.id,
        model_version=REPORTER_MODEL,
        weights_digest=DIGEST,
        log_size=5,
        taken_at=T1,
        ratings=rows,
    )
    log.submit(snapshot, svc)
    log.submit(settlement(seller.id, buyer.id, deal_id="d2", delivery="late", settled_at=T1), buyer)
    log.submit(settlement(seller.id, buyer.id, reporter_role="seller", payment="pass", settled_at=T1), seller)
    log.submit(
        make_event(marketplace=market.id, agent=seller.id, event="delivered", ref="r1", occurred_at=T2),
        market,
    )
    log.submit(graded(seller.id, grader=svc.id), svc)
    return log
