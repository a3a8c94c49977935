"""Reports arriving together share one round trip for their questions before grading (is this answer
set graded already? is this nonce used?), yet each is answered as if it had asked alone: a new report is
graded and logged, a replayed nonce refused, a report sent again gets its first index."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence

import msgspec
import pytest

from tests.helpers import new_card
from trustscore import canonical
from trustscore.errors import NonceReplay
from trustscore.exams.loader import DEFAULT_PUBLIC_DIR, ExamDirs, load_exam
from trustscore.ledger import dsse, keys
from trustscore.sdk import agent_from_spec, run_exam
from trustscore.sdk.runner import sign_run
from trustscore.services import service_keys
from trustscore.services.intake import GradedReport, Intake
from trustscore.services.log import LogService
from trustscore.services.metrics import Metrics
from trustscore.store import db
from trustscore.store.log import LogStore, NonceProbe

AGENTS = DEFAULT_PUBLIC_DIR.parent / "examples" / "agents" / "scripted.py"


def with_nonce(envelope: dsse.Envelope, nonce: str, key: keys.SigningKey) -> dsse.Envelope:
    """The same statement with another nonce, signed again."""
    statement = json.loads(canonical.b64decode(envelope.payload, what="payload"))
    statement["predicate"]["nonce"] = nonce
    return dsse.sign(canonical.encode(statement), [key])


def nonce_of(envelope: dsse.Envelope) -> str:
    nonce: str = json.loads(canonical.b64decode(envelope.payload, what="payload"))["predicate"]["nonce"]
    return nonce


async def test_reports_arriving_together_share_their_probe_and_keep_their_answers(
    dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    asked: list[int] = []
    probes = LogStore.nonce_probes

    async def counting(self: LogStore, batch: Sequence[NonceProbe]) -> object:
        asked.append(len(batch))
        return await probes(self, batch)

    monkeypatch.setattr(LogStore, "nonce_probes", counting)
    await db.migrate(dsn)
    pool = await db.create_pool(dsn, min_size=1, max_size=8)
    try:
        log = LogService(LogStore(pool), keys.SigningKey.generate(), "test.example/log", max_batch=100)
        grader = keys.SigningKey.generate()
        await service_keys.register(log, grader)
        log.trust_own_key(grader)
        intake = Intake(log, grader, ExamDirs(), Metrics())
        run = run_exam(load_exam("integrity@1", ExamDirs()), agent_from_spec(f"python:{AGENTS}:good"))
        agents = []
        for i in range(6):
            key, card = new_card(f"probed-{i}")
            await log.submit(msgspec.json.encode(card))
            agents.append((key, card))
        bodies = [msgspec.json.encode(sign_run(run, key)) for key, _ in agents[:5]]
        replay_key, replay_card = agents[5]
        replay = with_nonce(sign_run(run, replay_key), nonce_of(replay_card), replay_key)
        bodies.append(msgspec.json.encode(replay))
        asked.clear()

        answers = await asyncio.gather(*(intake.report(b) for b in bodies), return_exceptions=True)
        assert isinstance(answers[5], NonceReplay) and "already used" in str(answers[5]), answers[5]
        graded = [a for a in answers[:5] if isinstance(a, GradedReport)]
        assert len(graded) == 5 and not any(g.duplicate for g in graded), answers
        assert len({g.report.index for g in graded}) == 5
        for g in graded:  # each report's evidence follows its own report
            assert g.evidence.index == g.report.index + 1
        assert max(asked) > 1, asked  # reports asked together in one round trip
        assert sum(asked) == len(bodies)

        # The first report again: its answers are graded already, so it is that report (the probe finds
        # its evidence), whether asked alone or with a new report.
        careless = run_exam(
            load_exam("integrity@1", ExamDirs()), agent_from_spec(f"python:{AGENTS}:careless")
        )
        again, other = await asyncio.gather(
            intake.report(bodies[0]), intake.report(msgspec.json.encode(sign_run(careless, agents[1][0])))
        )
        assert again.duplicate and again.report.index == graded[0].report.index
        assert again.evidence.index == graded[0].evidence.index
        assert not other.duplicate
    finally:
        await pool.close()
