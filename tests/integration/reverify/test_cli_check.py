"""``trustscore reverify check`` over a small, real, signed log served through httpx's MockTransport."""

from __future__ import annotations

import argparse
import re
from collections.abc import Callable

import httpx
import pytest

from tests.helpers import new_card
from tests.unit.reverify.kit import item
from trustscore import canonical
from trustscore.cli import reverify as cli
from trustscore.cli.agent import card_envelope
from trustscore.client import LogClient
from trustscore.errors import VerificationError
from trustscore.exams.loader import DEFAULT_PUBLIC_DIR, ExamDirs, load_exam
from trustscore.kinds import catalog
from trustscore.kinds.exam_report import ExamReport
from trustscore.kinds.reverification import make_reverification, sampling
from trustscore.kinds.reverification.security import SecurityState
from trustscore.kinds.service_card import make_service_card
from trustscore.ledger import checkpoint, dsse, keys, merkle, note, statements
from trustscore.sdk import agent_from_spec, run_exam
from trustscore.sdk.runner import sign_run

assert catalog.ALL_KINDS
ORIGIN = "reverify.test/log"
LOG_KEY = keys.SigningKey.from_seed(b"\x30" * 32)
VERIFIER = keys.SigningKey.from_seed(b"\x31" * 32)
AGENT = keys.SigningKey.from_seed(b"\x32" * 32)
LOG_VERIFIER = note.verifier_for(ORIGIN, LOG_KEY.public_key)
REPORT_INDEX = 2


class FakeLog:
    """Leaves in order, served like /v1/log/*, with checkpoints signed by the log key."""

    def __init__(self) -> None:
        self.leaves: list[bytes] = []
        self.key_entries: dict[str, int] = {}

    def add(self, envelope: dsse.Envelope, registers: str | None = None) -> int:
        self.leaves.append(dsse.leaf_bytes(envelope))
        if registers:
            self.key_entries[registers] = len(self.leaves) - 1
        return len(self.leaves) - 1

    def hashes(self) -> list[bytes]:
        return [merkle.leaf_hash(leaf) for leaf in self.leaves]

    def root(self, size: int) -> bytes:
        return merkle.root_from_leaf_hashes(self.hashes()[:size])

    def handler(self, request: httpx.Request) -> httpx.Response:
        q, path, size = request.url.params, request.url.path, len(self.leaves)
        if path == "/v1/log/checkpoint":
            cp = checkpoint.Checkpoint(ORIGIN, size, self.root(size))
            return httpx.Response(200, text=checkpoint.sign_checkpoint(cp, LOG_KEY))
        if path == "/v1/log/entries":
            start, end = int(q["start"]), min(int(q["end"]), size)
            rows = [{"index": i, "leaf": canonical.b64encode(self.leaves[i])} for i in range(start, end)]
            return httpx.Response(200, json={"entries": rows})
        if path == "/v1/log/proof/inclusion":
            proof = merkle.inclusion_proof(int(q["index"]), int(q["size"]), self.hashes())
            return httpx.Response(200, json={"proof": [canonical.b64encode(h) for h in proof]})
        if path == "/v1/log/proof/consistency":
            proof = merkle.consistency_proof(int(q["from"]), int(q["to"]), self.hashes())
            return httpx.Response(200, json={"proof": [canonical.b64encode(h) for h in proof]})
        m = re.fullmatch(r"/v1/log/keys/(.+)", path)
        if m and m.group(1) in self.key_entries:
            return httpx.Response(200, json={"index": self.key_entries[m.group(1)]})
        return httpx.Response(404, text="not found")

    def client(self) -> LogClient:
        return LogClient("http://log.test", transport=httpx.MockTransport(self.handler))


def _report() -> dsse.Envelope:
    exam = load_exam("integrity@1", ExamDirs(DEFAULT_PUBLIC_DIR, None))
    agent = agent_from_spec(f"python:{DEFAULT_PUBLIC_DIR.parent / 'examples/agents/scripted.py'}:good")
    return sign_run(run_exam(exam, agent, timeout_s=10), AGENT)


def build(
    *, cosign: bool = True, root_of: Callable[[FakeLog], bytes] | None = None, cherry_pick: bool = False
) -> tuple[FakeLog, int]:
    log = FakeLog()
    card = make_service_card(VERIFIER.public_key, "reverify", ["reverify"])
    log.add(dsse.sign(card, [VERIFIER, LOG_KEY] if cosign else [VERIFIER]), registers=VERIFIER.id)
    log.add(card_envelope(AGENT, "agent"), registers=AGENT.id)  # the report's signer is proven by its card
    report_env = _report()
    assert log.add(report_env) == REPORT_INDEX
    log.add(new_card("stands in for the graded evidence")[1])
    payload = canonical.b64decode(report_env.payload)
    report = statements.parse_statement(payload).predicate
    assert isinstance(report, ExamReport)
    size = sampling.seed_size(REPORT_INDEX)
    root = root_of(log) if root_of else log.root(size)
    report_sha = canonical.sha256(payload)
    chosen = sampling.sample([i.item_id for i in report.items], 5, sampling.seed(root, report_sha, AGENT.id))
    if cherry_pick:
        chosen = [i.item_id for i in report.items][:5]
    r = make_reverification(
        verifier=VERIFIER.id,
        agent=AGENT.id,
        report_index=REPORT_INDEX,
        report_sha256=report_sha.hex(),
        exam=report.exam,
        exam_version=report.exam_version,
        exam_digest=report.exam_digest,
        endpoint="https://agent.example/ask",
        trigger="report",
        checkpoint_size=size,
        checkpoint_root=root,
        items=[item(i, 1000, 1000, "integrity") for i in chosen],
        private_items=[],
        security_before=SecurityState(),
        ran_at="2026-03-01T12:00:00Z",
    )
    index = log.add(dsse.sign(r, [VERIFIER]))
    for n in range(3):  # the log moves on
        log.add(new_card(f"later {n}")[1])
    return log, index


def test_an_honest_run_rechecks() -> None:
    log, index = build()
    with log.client() as client:
        done = cli.check(client, LOG_VERIFIER, index)
    assert done.checkpoint_size == len(log.leaves)
    assert [i.item_id for i in done.statement.items] == done.sample


def test_the_command_prints_what_it_proved(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    log, index = build()
    monkeypatch.setattr(cli, "LogClient", lambda server: log.client())
    parser = argparse.ArgumentParser()
    cli.register(parser.add_subparsers())
    key = note.make_verifier_key(ORIGIN, LOG_KEY.public_key)
    args = parser.parse_args(
        ["reverify", "check", "--server", "http://log.test", "--verifier-key", key, "--index", str(index)]
    )
    assert args.func(args) == 0
    out = capsys.readouterr().out
    assert "proven consistent" in out and "5 items recomputed and equal" in out


def test_an_invented_root_fails_the_consistency_proof() -> None:
    log, index = build(root_of=lambda log: canonical.sha256(b"a root the server made up"))
    with log.client() as client, pytest.raises(VerificationError):
        cli.check(client, LOG_VERIFIER, index)


def test_the_root_of_another_size_fails() -> None:
    log, index = build(root_of=lambda log: log.root(REPORT_INDEX + 1))
    with log.client() as client, pytest.raises(VerificationError):
        cli.check(client, LOG_VERIFIER, index)


def test_a_cherry_picked_sample_fails() -> None:
    log, index = build(cherry_pick=True)
    with log.client() as client, pytest.raises(VerificationError, match="sampled items"):
        cli.check(client, LOG_VERIFIER, index)


def test_a_reverifier_the_log_key_did_not_vouch_for_fails() -> None:
    log, index = build(cosign=False)
    with log.client() as client, pytest.raises(VerificationError, match="co-signed by the log key"):
        cli.check(client, LOG_VERIFIER, index)
