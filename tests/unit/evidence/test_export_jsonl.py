"""A log export in JSON Lines parses with the scoring parser and rates exactly like the derived batch."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from tests.unit.evidence.signed import T1, Log, TrustAll, busy_log, graded, settlement
from trustscore.evidence import derive_log, evidence_batch
from trustscore.evidence.export_jsonl import (
    evidence_jsonl,
    snapshot_jsonl_line,
    snapshots_jsonl,
    to_jsonl_line,
)
from trustscore.evidence.standing import REPORTER_MODEL
from trustscore.kinds.graded import GradedItem
from trustscore.scoring import load_weights, score_agents
from trustscore.scoring.inputs import SnapshotBatch
from trustscore.scoring.parse_jsonl import parse_evidence, parse_snapshots

ROOT = Path(__file__).resolve().parents[3]
BASELINE = load_weights(ROOT / "weights" / "baseline-v0.3.toml")
V1 = load_weights(ROOT / "weights" / "trustscore-v1.toml")
RATE_AT = dt.datetime(2026, 3, 10, tzinfo=dt.UTC)


def test_evidence_line_format() -> None:
    out = derive_log(busy_log().parsed(), TrustAll())
    d = next(d for d in out.evidence if d.issuer is not None)
    line = json.loads(to_jsonl_line(d))
    assert line == {
        "agent": d.agent,
        "dimension": "delivery",
        "source": "real",
        "at": "2026-03-01T12:00:00Z",
        "value": 1.0,
        "result": "success",
        "key": d.key,
        "issuer": d.issuer,
        "extra_weight": 0.5,
    }
    s = out.snapshots[0]
    assert json.loads(snapshot_jsonl_line(s)) == {
        "agent": s.agent,
        "at": "2026-03-02T12:00:00Z",
        "total": s.total,
        "model_version": REPORTER_MODEL,
    }


def test_export_parses_and_rates_like_the_derived_batch() -> None:
    out = derive_log(busy_log().parsed())
    batch, errors = parse_evidence(evidence_jsonl(out.evidence), dimensions=V1.dimension_names)
    assert errors == []
    snaps, snap_errors = parse_snapshots(snapshots_jsonl(out.snapshots))
    assert snap_errors == []
    assert len(batch) == len(out.evidence) and len(snaps) == len(out.snapshots)
    for weights in (BASELINE, V1):
        direct = score_agents(
            evidence_batch(out.evidence), SnapshotBatch.from_items(out.snapshots), weights, RATE_AT
        )
        assert score_agents(batch, snaps, weights, RATE_AT) == direct


def _score(log: Log, dimension: str) -> float | None:
    out = derive_log(log.parsed(), TrustAll())
    [rating] = score_agents(evidence_batch(out.evidence), None, BASELINE, RATE_AT)
    exported, _ = parse_evidence(evidence_jsonl(out.evidence), dimensions=BASELINE.dimension_names)
    [again] = score_agents(exported, None, BASELINE, RATE_AT)
    assert again == rating
    return rating.dimensions[dimension]


def test_a_retake_replaces_the_older_answer() -> None:
    log = Log()
    agent, svc = log.party("agent"), log.service("grader", ["grader"])
    item = GradedItem(
        item_id="c1", dimension="capability", grader="exact@1", value_millis=200, result="failure"
    )
    log.submit(graded(agent.id, grader=svc.id, items=[item]), svc)
    assert _score(log, "capability") == 20.0
    better = GradedItem(
        item_id="c1", dimension="capability", grader="exact@1", value_millis=800, result="success"
    )
    log.submit(graded(agent.id, grader=svc.id, items=[better], graded_at=T1), svc)
    assert _score(log, "capability") == 80.0


def test_a_corrected_settlement_replaces_the_old_report() -> None:
    log = Log()
    seller, buyer = log.party("seller"), log.party("buyer")
    log.submit(settlement(seller.id, buyer.id, delivery="fail"), buyer)
    assert _score(log, "delivery") == 0.0
    log.submit(settlement(seller.id, buyer.id, delivery="pass"), buyer)  # same deal, same settled_at
    assert _score(log, "delivery") == 100.0
