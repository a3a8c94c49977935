"""The scope fold resumed: a Collector fed the same statements over any split gives what collect() gives
over all of them at once, and the newest card; so the service, which feeds each agent's new leaves only,
serves the view an auditor computes from an export (scope.report.from_leaves)."""

from __future__ import annotations

import hashlib
import json

import msgspec

from tests.unit.scope.test_report import AGENT, AGENT_KEY, SERVICE, T0, sit
from trustscore import canonical
from trustscore.cli.agent import card_envelope
from trustscore.exams.forms import items_digest, scope_form
from trustscore.exams.generators.scope import SAMPLE_CAPABILITY
from trustscore.kinds.cards import AgentCard, CapabilityDeclaration, declarations_digest
from trustscore.kinds.scope_run import ScopeAnswer, ScopeRun, make_scope_run, run_nonce
from trustscore.kinds.sittings import SittingClose, SittingOpen, make_close, make_open
from trustscore.ledger import statements
from trustscore.ledger.statements import ParsedStatement
from trustscore.scope.report import _newest_card, build
from trustscore.scope.runs import Collector, collect

T = statements.format_time(T0)
SECRET = b"\x01" * 32
COMMITMENT = hashlib.sha256(SECRET).hexdigest()
DECL = msgspec.convert(SAMPLE_CAPABILITY, CapabilityDeclaration)
BROADER = msgspec.convert({**SAMPLE_CAPABILITY, "id": "everything"}, CapabilityDeclaration)


def card(index: int, name: str, declaration: CapabilityDeclaration) -> tuple[int, ParsedStatement]:
    env = card_envelope(AGENT_KEY, name, declarations=[declaration], non_capabilities=["legal advice"])
    return index, statements.parse_statement(canonical.b64decode(env.payload))


def opened(index: int, declaration: CapabilityDeclaration) -> tuple[int, ParsedStatement]:
    o = SittingOpen(nonce=f"sitting-open-{index:064d}", issued_at=T, service=SERVICE, agent=AGENT,
                    request_index=0, request_sha256="b" * 64, exam="scope@1",
                    form=scope_form([declaration], ["legal advice"]), commitment=COMMITMENT, deadline=T,
                    opened_at=T)  # fmt: skip
    return index, statements.parse_statement(make_open(o))


def closed(index: int, sitting: int) -> tuple[int, ParsedStatement]:
    items, graded = sit(lambda i, k: json.dumps({"status": "OUT_OF_SCOPE", "reason": "not mine"}))
    c = SittingClose(nonce=f"sitting-close-{index:012d}", issued_at=T, service=SERVICE, agent=AGENT,
                     sitting=sitting, exam="scope@1", commitment=COMMITMENT, secret=SECRET.hex(), root="c" * 64,
                     items_digest=items_digest(items), outcome="reported", report_index=2, report_sha256="d" * 64,
                     closed_at=T, items=graded, dialogues={})  # fmt: skip
    return index, statements.parse_statement(make_close(c))


def history() -> list[tuple[int, ParsedStatement]]:
    """A card, a sitting opened under it, a broader card raced in before the close, a card repeating the
    declarations under a new name, then a second sitting under that card."""
    return [
        card(0, "v1", DECL),
        opened(1, DECL),
        card(2, "v2", BROADER),
        closed(3, 1),
        card(4, "v2 renamed", BROADER),
        opened(5, BROADER),
        closed(6, 5),
    ]


def test_any_split_gives_the_whole_fold() -> None:
    stmts = history()
    cards, runs = collect(AGENT, stmts)
    assert len(cards) == 2 and len(runs) == 2  # the renamed card changed nothing; two sittings closed
    whole = msgspec.json.encode(build(AGENT, cards, runs, T0, _newest_card(AGENT, stmts)))
    for first in range(len(stmts) + 1):
        for second in range(first, len(stmts) + 1):
            c = Collector(AGENT)
            for part in (stmts[:first], stmts[first:second], stmts[second:]):
                c.feed(part)
            assert c.card == _newest_card(AGENT, stmts)
            assert msgspec.json.encode(build(AGENT, c.cards, c.runs, T0, c.card)) == whole


def test_a_server_run_counts_for_the_card_it_names_not_one_logged_while_it_ran() -> None:
    """A card bumping only the model version (same declarations, so the same form) logged while a server
    run was in flight took that run as its evaluation: evaluation_due was false for a card nobody had
    evaluated (found by review, 2026-12-07). The run names the card it evaluated; it counts for it only."""
    a_env = card_envelope(
        AGENT_KEY, "a", declarations=[DECL], non_capabilities=["legal advice"], model_version="m-A"
    )
    b_env = card_envelope(
        AGENT_KEY, "a", declarations=[DECL], non_capabilities=["legal advice"], model_version="m-B"
    )
    a, b = (statements.parse_statement(canonical.b64decode(e.payload)) for e in (a_env, b_env))
    assert isinstance(a.predicate, AgentCard) and isinstance(b.predicate, AgentCard)
    items, graded = sit(lambda i, k: json.dumps({"status": "OUT_OF_SCOPE", "reason": "not mine"}))
    run = ScopeRun(nonce=run_nonce(AGENT, "card:0"), issued_at=T, verifier=SERVICE, agent=AGENT,
                   trigger="declarations", run_key="card:0", card_index=0,
                   declarations_digest=declarations_digest(a.predicate), model_version="m-A",
                   endpoint="https://agent.example/a2a", exam="scope@1",
                   form=scope_form([DECL], ["legal advice"]), seed_signature=canonical.b64encode(b"\x00" * 64),
                   items_digest=items_digest(items),
                   answers=[ScopeAnswer(item_id=g.item_id, sha256="e" * 64, error=None) for g in graded],
                   items=graded, ran_at=T)  # fmt: skip
    logged = (3, statements.parse_statement(make_scope_run(run)))
    in_time = build("agent", *collect(AGENT, [(0, a), logged]), T0)
    assert in_time.shs is not None and [r.current for r in in_time.runs] == [True]
    raced = build("agent", *collect(AGENT, [(0, a), (2, b), logged]), T0)
    assert raced.shs is None and raced.evaluation_due and [r.current for r in raced.runs] == [False]
