"""Public exam files alone (their answers are public), pinned: an agent whose only evidence is perfect
answers to them rates 312 (B) under trustscore-v2 and 612 (A) under baseline-v0.3, served beside it by
default (a stated limit: released weights never change). Under trustscore-v2's first medals release the
public items earned a silver capability medal (found by an adversarial audit, 2026-12-07); the served
release 2 counts them for the score, never towards a medal. docs/methodology.md, "Known attacks" and
"Medals": if these numbers move, the docs' figures must move with them.

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
from trustscore.scoring.medals import load_medal_rules, medals_of, medals_path
from trustscore.services.ratings import DEFAULT_WEIGHTS_DIR, load_medals, load_models

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
    micros = int(AT.timestamp() * 1_000_000)
    seen = {}
    for model, weights in MODELS.items():
        [r] = [r for r in score_agents(batch, None, weights, AT) if r.agent == agent.id]
        medal = {}
        if model in MEDALS:
            [m] = medals_of(batch, [r], MEDALS[model], micros)
            medal = {d: v.medal for d, v in m.dimensions.items() if v.medal}
            assert m.dimensions["capability"].real_n == 0  # public items are not real evidence of capability
        seen[model] = (r.total, r.grade, medal)
        if model == "trustscore-v2":
            first = load_medal_rules(medals_path(DEFAULT_WEIGHTS_DIR, model, release=1), weights)
            [old] = medals_of(batch, [r], first, micros)
            assert {d: v.medal for d, v in old.dimensions.items() if v.medal} == {"capability": "silver"}
    assert seen["trustscore-v2"] == (312, "B", {})
    assert seen["baseline-v0.3"] == (612, "A", {})
