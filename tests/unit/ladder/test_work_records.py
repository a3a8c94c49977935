"""work-record/v1 from real signed statements: who may report it (admission) and what it weighs (derive)."""

from __future__ import annotations

import pytest

from tests.unit.evidence.signed import T0, TrustAll, checked
from trustscore.errors import InvalidInput, UnknownSigner
from trustscore.evidence import Context, derive
from trustscore.evidence.standing import Standing
from trustscore.kinds.admission import Registration, admit
from trustscore.kinds.work_records import Commit, Confirmation, Run, WorkRecord, make_work_record
from trustscore.ladder import work_evidence
from trustscore.ladder.rows import ladder_rows
from trustscore.ladder.rule import CI_VERIFIED, RULE_0, RULE_1, SELF_ATTESTED_WEIGHT
from trustscore.ladder.stats import outcome_stats
from trustscore.ledger import keys, statements
from trustscore.scoring.inputs import DerivedEvidence

CI = [Confirmation(kind="ci", ref="https://ci.example/run/7", status="success")]


class Cards:
    """Registrations as the log's cards make them."""

    def __init__(self) -> None:
        self.regs: dict[str, Registration] = {}

    def add(self, kind: str, controller: str | None = None) -> keys.SigningKey:
        key = keys.SigningKey.generate()
        self.regs[key.id] = Registration(key.id, key.public_key, kind, controller)
        return key

    def admit(self, payload: bytes, signer: keys.SigningKey) -> None:
        entry = checked(payload, signer, known={k: r.public_key for k, r in self.regs.items()})
        admit(entry.statement, [signer.id], self.regs.get, "ts1_" + "0" * 40)


def work(reporter: keys.SigningKey, agent: keys.SigningKey, **kw: object) -> bytes:
    fields: dict[str, object] = {"task_ref": "T-1", "claimed_outcome": "done", "finished_at": T0}
    fields.update(kw)
    return make_work_record(reporter=reporter.id, agent=agent.id, **fields)  # type: ignore[arg-type]


def test_the_agent_itself_and_a_key_of_its_controller_may_self_attest() -> None:
    cards = Cards()
    operator = keys.SigningKey.generate()
    agent = cards.add("agent", operator.id)
    harness = cards.add("ci", operator.id)
    cards.admit(work(agent, agent), agent)
    cards.admit(work(harness, agent, attestation="self"), harness)


def test_a_stranger_may_not_self_attest_for_an_agent() -> None:
    cards = Cards()
    agent, stranger = cards.add("agent"), cards.add("ci")
    with pytest.raises(InvalidInput, match="own controller"):
        cards.admit(work(stranger, agent, attestation="self"), stranger)


def test_the_agents_own_ci_key_cannot_confirm_its_work() -> None:
    cards = Cards()
    operator = keys.SigningKey.generate()
    agent = cards.add("agent", operator.id)
    own_ci = cards.add("ci", operator.id)
    with pytest.raises(InvalidInput, match="self-dealing"):
        cards.admit(work(own_ci, agent, confirmations=CI), own_ci)


def test_only_ci_counterparty_or_marketplace_keys_confirm() -> None:
    cards = Cards()
    agent, other_agent = cards.add("agent"), cards.add("agent")
    with pytest.raises(InvalidInput, match="counterparty, marketplace or ci"):
        cards.admit(work(other_agent, agent, confirmations=CI), other_agent)
    ci = cards.add("ci")
    cards.admit(work(ci, agent, confirmations=CI), ci)


def test_an_unregistered_agent_or_reporter_is_refused() -> None:
    cards = Cards()
    ci = cards.add("ci")
    ghost = keys.SigningKey.generate()
    with pytest.raises(UnknownSigner):
        cards.admit(work(ci, ghost, confirmations=CI), ci)


def signed(payload: bytes, signer: keys.SigningKey) -> statements.ParsedStatement:
    return checked(payload, signer, known={signer.id: signer.public_key}).statement


def fixed(weight: float) -> Context:
    return Context(reporter_weight=lambda _r, _i: weight, standing=TrustAll())


def weighed(index: int, stmt: statements.ParsedStatement) -> list[DerivedEvidence]:
    """A self-attested record's items before the reporter-standing policy (which pools them all)."""
    assert isinstance(stmt.predicate, WorkRecord)
    return work_evidence.derive_work_record(index, stmt.predicate, lambda _r, _i: 1.0)


def test_a_self_attested_rung_5_weighs_less_than_a_ci_key_attested_one() -> None:
    agent, ci = keys.SigningKey.generate(), keys.SigningKey.generate()
    mine = weighed(3, signed(work(agent, agent, confirmations=CI), agent))
    theirs = derive(4, signed(work(ci, agent, confirmations=CI), ci), fixed(0.5))
    assert [d.dimension for d in mine] == [d.dimension for d in theirs] == ["delivery"]
    assert mine[0].extra_weight == SELF_ATTESTED_WEIGHT  # rung 5 weighs 1.0 x 0.4
    assert theirs[0].extra_weight == 0.5  # rung 5 weighs 1.0 x the reporter's counterparty weight
    assert mine[0].extra_weight < theirs[0].extra_weight
    assert (mine[0].source, theirs[0].source) == ("self-reported", "real")
    assert mine[0].key == f"work:{agent.id}:T-1" and mine[0].issuer == agent.id


def test_a_self_attested_record_never_has_standing() -> None:
    """standing-v2: an agent's own word about itself goes to its pool even when its reporter has standing
    (tests/unit/evidence/test_self_attested_standing.py has the attack this stops)."""
    agent = keys.SigningKey.generate()
    stmt = signed(work(agent, agent, confirmations=CI), agent)
    assert weighed(0, stmt) and derive(0, stmt, fixed(1.0)) == []  # no standing evidence: no pool room


def test_work_records_go_through_reporter_standing() -> None:
    """A fresh CI key's word goes to the subject's pool: with no standing evidence it adds nothing."""
    agent, ci = keys.SigningKey.generate(), keys.SigningKey.generate()
    stmt = signed(work(ci, agent, confirmations=CI), ci)
    assert derive(0, stmt, Context(standing=Standing())) == []
    rows = ladder_rows(0, stmt, [])
    assert [(r.rung, r.seq, r.attested) for r in rows] == [(CI_VERIFIED, None, "confirmed")]


def test_an_unflown_record_has_a_row_but_no_evidence_and_rows_name_their_rule() -> None:
    agent = keys.SigningKey.generate()
    stmt = signed(work(agent, agent, runs=[Run(kind="test", command="cargo test")]), agent)
    items = weighed(0, stmt)
    assert [round(d.extra_weight, 9) for d in items] == [round(0.2 * SELF_ATTESTED_WEIGHT, 9)]  # rung 1
    [row] = ladder_rows(0, stmt, items, RULE_1)
    assert (row.rung, row.summary, row.rule, row.seq) == (1, "result unknown", RULE_1, 0)
    [old] = ladder_rows(0, stmt, items, RULE_0)
    assert (old.rung, old.rule) == (3, RULE_0)
    # the scoring evidence is pinned to the scoring rule whatever rule the index is on
    assert weighed(0, stmt) == items
    nothing = signed(work(agent, agent, claimed_outcome="unknown"), agent)
    assert weighed(1, nothing) == []
    assert [(r.rung, r.seq) for r in ladder_rows(1, nothing, [])] == [(0, None)]


def test_a_work_records_row_names_its_repository_and_the_stats_group_by_it() -> None:
    """The source document: the stats tool "groups that share by model, adapter or repo". A record's row
    names its first commit's repository; one without commits is in no repo group (not an empty one)."""
    agent = keys.SigningKey.generate()
    commits = [Commit(repository="github.com/acme/widgets", commit="abcdef1"),
               Commit(repository="github.com/acme/other", commit="abcdef2")]  # fmt: skip
    stmt = signed(work(agent, agent, commits=commits), agent)
    [row] = ladder_rows(0, stmt, weighed(0, stmt))
    assert row.repo == "github.com/acme/widgets"
    bare = signed(work(agent, agent, task_ref="T-2"), agent)
    [none] = ladder_rows(1, bare, weighed(1, bare))
    assert none.repo is None
    stats = outcome_stats([row, none], "repo", 1, log_size=2)
    assert [(g.group, g.stats.n) for g in stats.groups] == [("github.com/acme/widgets", 1)]
