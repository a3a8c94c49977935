"""A confirming reporter without standing does not confirm work in the outcome stats (rows
``unvouched``, since 2026-12-07).

The stats counted any other reporter's row in ``confirmed``, whoever signed it: one free ``ci`` party key
"confirmed" 20 free agent keys' work (rate 1.0, confirmed = 20) and, posting `failed` records of a
competitor's public task refs, took that model from rate 1.0 to 0.0 with confirmed = 20 (found by an
adversarial audit, 2026-12-07). Ratings already pooled such a reporter's items (reporter standing); its rows
now say so, and ``confirmed`` counts only reporters with standing and the server. Its rows still rank over
the agent's own (a CI party cannot have standing, and a review of a first version showed an agent's
made-up green CI then replacing a real CI party's failure): the rate still moves with a free key — a
stated limit — but ``confirmed`` shows it.
"""

from __future__ import annotations

import msgspec

from trustscore.cli.agent import card_envelope
from trustscore.evidence.project_log import ProjectionState, project
from trustscore.kinds.approvals import make_approval
from trustscore.kinds.events import make_event
from trustscore.kinds.parties import make_party_card
from trustscore.kinds.work_records import Confirmation, make_work_record
from trustscore.ladder.stats import outcome_stats, strongest
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


def test_a_free_ci_keys_rows_are_not_confirmed() -> None:
    envs, log_key, ci, honest = _world(reporter_approved=False)
    before = _stats(envs, log_key)
    assert before["weak-model"] == (20, 1.0, 0)  # its rows are not counted as confirmed
    assert before["strong-model"] == (20, 1.0, 0)
    _deflate(envs, ci, honest)
    assert _stats(envs, log_key)["strong-model"] == (20, 0.0, 0)  # it moves the rate (stated), unconfirmed


def test_a_reporter_with_standing_confirms() -> None:
    envs, log_key, market, honest = _world(reporter_approved=True)
    assert _stats(envs, log_key)["weak-model"] == (20, 1.0, 20)
    _deflate(envs, market, honest)
    assert _stats(envs, log_key)["strong-model"] == (20, 0.0, 20)


def test_an_agents_made_up_green_ci_does_not_replace_a_ci_partys_failure() -> None:
    """A CI party key has no standing (the operator approves marketplaces only): its `failed` record of a
    task still stands over the agent's own record of the same task claiming a green CI run."""
    log_key, ci, agent = keys.SigningKey.generate(), keys.SigningKey.generate(), keys.SigningKey.generate()
    envs = [dsse.sign(make_party_card(ci.public_key, "ci", "ci"), [ci]), card_envelope(agent, "agent")]
    for n in range(20):
        failed = make_work_record(reporter=ci.id, agent=agent.id, task_ref=f"task-{n}", claimed_outcome="failed",
                                  finished_at=T, model="m1")  # fmt: skip
        envs.append(dsse.sign(failed, [ci]))
        claimed = make_work_record(reporter=agent.id, agent=agent.id, task_ref=f"task-{n}", claimed_outcome="done",
                                   finished_at=T, model="m1", confirmations=GREEN)  # fmt: skip
        envs.append(dsse.sign(claimed, [agent]))
    assert _stats(envs, log_key)["m1"] == (20, 0.0, 0)


def test_a_retired_marketplaces_correction_replaces_its_own_row() -> None:
    """A marketplace retired after reporting `delivered` corrects it to `rejected`: the correction is pooled
    (no standing any more) but replaces the marketplace's own earlier row (a row names the statement's
    reporter, not the pool)."""
    log_key, market, agent = (keys.SigningKey.generate() for _ in range(3))
    envs = [
        dsse.sign(make_party_card(market.public_key, "market", "marketplace"), [market]),
        card_envelope(agent, "agent"),
        dsse.sign(make_approval(operator=log_key.id, marketplace=market.id, action="approve"), [log_key]),
    ]
    for event in ("delivered", "rejected"):
        if event == "rejected":
            envs.append(
                dsse.sign(
                    make_approval(operator=log_key.id, marketplace=market.id, action="retire"), [log_key]
                )
            )
        envs.append(dsse.sign(make_event(marketplace=market.id, agent=agent.id, event=event, ref="order-1", occurred_at=T), [market]))  # fmt: skip
    out = project([(i, msgspec.json.encode(e)) for i, e in enumerate(envs)], ProjectionState(log_key.public_key), verify=True)  # fmt: skip
    assert not out.rejected, out.rejected
    [kept] = [r for r in strongest(out.ladder) if r.kind == "event"]
    assert (kept.rung, kept.attested, kept.issuer) == (0, "unvouched", market.id)
