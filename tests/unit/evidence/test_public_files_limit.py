"""A stated limit, pinned: an agent whose only evidence is perfect answers to the public exam files (their
answers are public) rates 312 (B) under trustscore-v2 with a silver capability medal, and 612 (A) under
baseline-v0.3, served beside it by default (found by an adversarial audit, 2026-12-07; docs/methodology.md,
"Known attacks": released weights and medals never change, so a fix is a new model version). If these
numbers move, the docs' figures must move with them.

The log is built signed and projected with verify=True (as the server), then scored with the served
models and medals. Every graded item is the server's regrade of a perfect report of a public file.
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import msgspec

from trustscore.cli.agent import card_envelope
from trustscore.evidence.derive import evidence_batch
from trustscore.evidence.project_log import ProjectionState, project
from trustscore.kinds.graded import GradedItem, make_graded_evidence
from trustscore.kinds.service_card import make_service_card
from trustscore.ledger import dsse, keys, statements
from trustscore.scoring import score_agents
from trustscore.scoring.medals import medals_of
from trustscore.services.ratings import load_medals, load_models

MODELS = load_models()
MEDALS = load_medals(MODELS)
EXAMS = Path(__file__).resolve().parents[3] / "exams"
PUBLIC = ["capability", "reliability", "delivery", "security", "negotiation", "integrity"]
AT = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)


def test_public_files_alone_rate_as_the_docs_state() -> None:
    log_key, svc, agent = (keys.SigningKey.generate() for _ in range(3))
    envs = [
        dsse.sign(make_service_card(svc.public_key, "svc", ["grader"]), [svc, log_key]),
        card_envelope(agent, "lookup-bot"),
    ]
    for name in PUBLIC:
        exam = json.loads((EXAMS / name / "v1.json").read_text())
        items = [
            GradedItem(item_id=i["id"], dimension=i["dimension"], grader=i["grader"],
                       value_millis=1000, result="success")
            for i in exam["items"]
        ]  # fmt: skip
        envs.append(
            dsse.sign(
                make_graded_evidence(
                    grader=svc.id, agent=agent.id, report_index=1, report_sha256="ab" * 32,
                    exam=name, exam_version=1, exam_digest="sha256:" + "cd" * 32, tier="public",
                    graded_at=statements.format_time(AT - dt.timedelta(hours=1)), items=items,
                ),
                [svc],
            )
        )  # fmt: skip
    out = project([(i, msgspec.json.encode(e)) for i, e in enumerate(envs)], ProjectionState(log_key.public_key),
                  verify=True)  # fmt: skip
    assert not out.rejected
    batch = evidence_batch(out.evidence)
    seen = {}
    for model, weights in MODELS.items():
        [r] = [r for r in score_agents(batch, None, weights, AT) if r.agent == agent.id]
        medal = {}
        if model in MEDALS:
            [m] = medals_of(batch, [r], MEDALS[model], int(AT.timestamp() * 1_000_000))
            medal = {d: v.medal for d, v in m.dimensions.items() if v.medal}
        seen[model] = (r.total, r.grade, medal)
    assert seen["trustscore-v2"] == (312, "B", {"capability": "silver"})
    assert seen["baseline-v0.3"] == (612, "A", {})
