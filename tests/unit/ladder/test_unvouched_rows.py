"""A confirming reporter without standing neither confirms work in the outcome stats nor replaces the
agent's own row (rows ``unvouched``, since 2026-12-07).

The stats ranked a confirmed row over an agent's own, and counted it in ``confirmed``, whoever signed it:
one free ``ci`` party key set any model's public rate both ways — 20 free agent keys "confirmed" by it
read rate 1.0 with confirmed = 20, and the same key posting `failed` records of a competitor's public
task refs took that model from rate 1.0 to 0.0, its rows now "confirmed" (found by an adversarial audit,
2026-12-07). Ratings already pooled such a reporter's items (reporter standing); the stats now read the
same policy's word: its rows rank as the agent's own and are not counted as confirmed. A reporter with
standing (an approved marketplace) still confirms.
"""

from __future__ import annotations

import msgspec

from trustscore.cli.agent import card_envelope
from trustscore.evidence.project_log import ProjectionState, project
from trustscore.kinds.approvals import make_approval
from trustscore.kinds.parties import make_party_card
from trustscore.kinds.work_records import Confirmation, make_work_record
from trustscore.ladder.stats import outcome_stats
from trustscore.ledger import dsse, keys

T = "2026-05-01T12:00:00.000000Z"
GREEN = [Confirmation(kind="ci", ref="run-1", status="success")]


def _stats(
    envs: list[dsse.Envelope], log_key: keys.SigningKey
) -> dict[str, tuple[int, float | None, int | None]]:
    leaves = [(i, msgspec.json.encode(e)) for i, e in enumerate(envs)]
    out = project(leaves, ProjectionState(log_key.public_key), verify=True)
    assert not out.rejected, out.rejected
    stats = outcome_stats(out.ladder, "model", 20, len(envs))
    return {g.group: (g.stats.n, g.stats.rate, g.stats.confirmed) for g in stats.groups}


def _world(
    reporter_approved: bool,
) -> tuple[list[dsse.Envelope], keys.SigningKey, keys.SigningKey, list[keys.SigningKey]]:
    log_key, reporter = keys.SigningKey.generate(), keys.SigningKey.generate()
    card = make_party_card(reporter.public_key, "reporter", "marketplace" if reporter_approved else "ci")
    envs = [dsse.sign(card, [reporter])]
    if reporter_approved:
        envs.append(
            dsse.sign(
                make_approval(operator=log_key.id, marketplace=reporter.id, action="approve"), [log_key]
            )
        )
    honest = [keys.SigningKey.generate() for _ in range(20)]
    for n, a in enumerate(honest):  # a strong model's agents, each reporting its own CI-verified work
        envs.append(card_envelope(a, f"honest-{n}"))
        record = make_work_record(reporter=a.id, agent=a.id, task_ref=f"task-{n}", claimed_outcome="done",
                                  finished_at=T, model="strong-model", confirmations=GREEN)  # fmt: skip
        envs.append(dsse.sign(record, [a]))
    for n in range(20):  # a weak model's agents, free keys, "confirmed" by the reporter
        a = keys.SigningKey.generate()
        envs.append(card_envelope(a, f"sock-{n}"))
        record = make_work_record(reporter=reporter.id, agent=a.id, task_ref=f"t{n}", claimed_outcome="done",
                                  finished_at=T, model="weak-model", confirmations=GREEN)  # fmt: skip
        envs.append(dsse.sign(record, [reporter]))
    return envs, log_key, reporter, honest


def _deflate(envs: list[dsse.Envelope], reporter: keys.SigningKey, honest: list[keys.SigningKey]) -> None:
    for n, a in enumerate(honest):  # the reporter "confirms" each of the competitor's public tasks failed
        record = make_work_record(reporter=reporter.id, agent=a.id, task_ref=f"task-{n}",
                                  claimed_outcome="failed", finished_at=T, model="strong-model")  # fmt: skip
        envs.append(dsse.sign(record, [reporter]))


def test_a_free_ci_key_neither_confirms_nor_overrides() -> None:
    envs, log_key, ci, honest = _world(reporter_approved=False)
    before = _stats(envs, log_key)
    assert before["weak-model"] == (20, 1.0, 0)  # its rows are not counted as confirmed
    assert before["strong-model"] == (20, 1.0, 0)
    _deflate(envs, ci, honest)
    assert _stats(envs, log_key)["strong-model"] == (20, 1.0, 0)  # the agents' own rows stand


def test_a_reporter_with_standing_still_confirms() -> None:
    envs, log_key, market, honest = _world(reporter_approved=True)
    assert _stats(envs, log_key)["weak-model"] == (20, 1.0, 20)
    _deflate(envs, market, honest)
    assert _stats(envs, log_key)["strong-model"] == (20, 0.0, 20)  # its word stands over the agents' own
