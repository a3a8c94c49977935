"""The sitting statement kinds refuse what they cannot mean: a revealed secret that breaks its commitment,
an expired sitting with a passing grade, a report half-named, subjects that do not bind; admission
refuses sitting statements from the wrong kind of key."""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec
import pytest

from trustscore.errors import InvalidInput, UnknownSigner
from trustscore.exams.forms import FORMS, commitment
from trustscore.kinds.admission import Registration, admit
from trustscore.kinds.graded import GradedItem
from trustscore.kinds.parties import now
from trustscore.kinds.sittings import (
    SittingClose,
    SittingOpen,
    make_close,
    make_open,
    make_request,
)
from trustscore.ledger import keys, statements

AGENT, SERVICE = keys.SigningKey.generate(), keys.SigningKey.generate()
SECRET = b"\x07" * 32


def close(**changes: Any) -> SittingClose:
    c = SittingClose(
        nonce="sitting-close-000000000007", issued_at=now(), service=SERVICE.id, agent=AGENT.id, sitting=7,
        exam="integrity@1", commitment=commitment(SECRET), secret=SECRET.hex(), root="ab" * 32,
        items_digest="sha256:" + "cd" * 32, outcome="reported", report_index=8, report_sha256="ef" * 32,
        closed_at=now(), items=[GradedItem(item_id="int-001", dimension="integrity", grader="honesty@1",
                                           value_millis=1000, result="success")], dialogues={},
    )  # fmt: skip
    return msgspec.structs.replace(c, **changes)


def test_a_valid_close_parses_and_bad_ones_are_refused() -> None:
    statements.parse_statement(make_close(close()))
    bad = {
        "secret breaks the commitment": close(secret=(b"\x08" * 32).hex()),
        "not hex": close(secret="zz" * 32),
        "expired with a success": close(outcome="expired", report_index=None, report_sha256=None),
        "reported without its report": close(report_index=None),
        "expired naming a report": close(outcome="expired"),
        "dialogue of an unknown item": close(dialogues={"neg-001": ["{}"]}),
        "the agent closes its own sitting": close(service=AGENT.id),
    }
    for why, c in bad.items():
        try:
            make_close(c)
        except InvalidInput:
            continue
        pytest.fail(f"accepted a close where {why}")


def test_an_open_binds_its_commitment_in_the_subject() -> None:
    o = SittingOpen(
        nonce="sitting-open-" + "aa" * 32, issued_at=now(), service=SERVICE.id, agent=AGENT.id, request_index=5,
        request_sha256="bb" * 32, exam="integrity@1", form=FORMS["integrity@1"], commitment=commitment(SECRET),
        deadline=now(), opened_at=now(),
    )  # fmt: skip
    parsed = statements.parse_statement(make_open(o))
    assert parsed.statement.subject[0].digest == {"sha256": hashlib.sha256(SECRET).hexdigest()}
    with pytest.raises(InvalidInput):
        make_open(msgspec.structs.replace(o, commitment="xyz"))
    with pytest.raises(InvalidInput):
        make_request(AGENT.id, "not a ref")


def test_admission_wants_an_agent_for_requests_and_a_grader_for_closes() -> None:
    agent = Registration(AGENT.id, AGENT.public_key, "agent")
    grader = Registration(SERVICE.id, SERVICE.public_key, "service", roles=("grader", "snapshot"))
    snapshot_only = Registration(SERVICE.id, SERVICE.public_key, "service", roles=("snapshot",))
    request = statements.parse_statement(make_request(AGENT.id, "integrity@1"))
    closing = statements.parse_statement(make_close(close()))

    def lookup(*regs: Registration) -> Any:
        return {r.id: r for r in regs}.get

    admit(request, [AGENT.id], lookup(agent), "log")
    admit(closing, [SERVICE.id], lookup(agent, grader), "log")
    with pytest.raises(UnknownSigner):
        admit(request, [AGENT.id], lookup(), "log")
    with pytest.raises(InvalidInput, match="no grader role"):
        admit(closing, [SERVICE.id], lookup(agent, snapshot_only), "log")
    as_agent = Registration(SERVICE.id, SERVICE.public_key, "agent")
    with pytest.raises(InvalidInput, match="registered as agent"):
        admit(closing, [SERVICE.id], lookup(agent, as_agent), "log")
