"""Real exams against the scripted agents through every adapter: the grades separate the personas."""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest

from trustscore.errors import AgentUnavailable
from trustscore.exams.loader import DEFAULT_PUBLIC_DIR, ExamDirs, load_exam
from trustscore.exams.reporting import exam_for, grade_report
from trustscore.kinds.exam_report import open_report
from trustscore.ledger import keys
from trustscore.sdk import Agent, agent_from_spec, run_exam
from trustscore.sdk.runner import RunResult, sign_run

DIRS = ExamDirs(DEFAULT_PUBLIC_DIR, None)
AGENTS = DEFAULT_PUBLIC_DIR.parent / "examples" / "agents"
EXAMS = ("capability@1", "reliability@1", "delivery@1", "security@1", "negotiation@1", "integrity@1")
PERSONAS = ("good", "careless", "gullible", "bluffer")
ADAPTERS = ("python", "cmd", "http", "openai")
KEY = keys.SigningKey.from_seed(b"\x07" * 32)


def make_agent(adapter: str, persona: str, serve: Callable[[str, str], str]) -> Agent:
    if adapter == "python":
        return agent_from_spec(f"python:{AGENTS / 'scripted.py'}:{persona}")
    if adapter == "cmd":
        return agent_from_spec(f"cmd:{sys.executable} {AGENTS / 'scripted.py'} --persona {persona}")
    if adapter == "http":
        return agent_from_spec(f"http:{serve(persona, 'plain')}/agent")
    return agent_from_spec(f"openai:{persona}@{serve(persona, 'openai')}/v1")


def sit(
    adapter: str, persona: str, exam_ref: str, serve: Callable[[str, str], str], timeout: float = 20
) -> RunResult:
    agent = make_agent(adapter, persona, serve)
    try:
        return run_exam(load_exam(exam_ref, DIRS), agent, timeout_s=timeout)
    finally:
        agent.close()


def mean(run: RunResult) -> float:
    return sum(r.grade.value for r in run.records) / len(run.records) / 1000


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_grades_separate_the_personas(adapter: str, serve: Callable[[str, str], str]) -> None:
    m: dict[tuple[str, str], float] = {}
    for persona in PERSONAS:
        for exam_ref in EXAMS:
            run = sit(adapter, persona, exam_ref, serve)
            assert all(r.response.error is None for r in run.records), exam_ref
            m[(persona, exam_ref.split("@")[0])] = mean(run)
    # The good agent does well everywhere (negotiation has scenarios where the target is out of reach).
    for exam_ref in EXAMS:
        name = exam_ref.split("@")[0]
        assert m[("good", name)] >= (0.85 if name == "negotiation" else 1.0), name
    # The careless agent is worse wherever care matters.
    for name in ("capability", "reliability", "delivery", "negotiation", "integrity", "security"):
        assert m[("careless", name)] < m[("good", name)] - 0.2, name
    # The gullible agent is as able as the good one but obeys injected instructions.
    assert m[("gullible", "capability")] == m[("good", "capability")]
    assert m[("gullible", "security")] == 0.0
    # The bluffer invents answers to unanswerable questions.
    assert m[("bluffer", "integrity")] <= 0.5 < m[("good", "integrity")]
    assert m[("bluffer", "capability")] == m[("good", "capability")]


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_signed_report_regrades_identically(adapter: str, serve: Callable[[str, str], str]) -> None:
    import json

    import msgspec

    run = sit(adapter, "careless", "integrity@1", serve)
    verified = open_report(json.loads(msgspec.json.encode(sign_run(run, KEY))))
    regraded = grade_report(verified.report, exam_for(verified.report, DIRS))
    assert [g.grade for g in regraded] == [r.grade for r in run.records]
    assert verified.report.adapter == run.adapter


@pytest.mark.parametrize("adapter", ADAPTERS)
@pytest.mark.parametrize("persona", ["crash", "hang", "garbage"])
def test_broken_agents_fail_items_not_the_run(
    adapter: str, persona: str, serve: Callable[[str, str], str]
) -> None:
    if persona == "garbage" and adapter != "python":
        # Never one usable answer (the python garbage persona returns some strings): no report at all.
        with pytest.raises(AgentUnavailable, match="gave no answer to any of the 6 items"):
            sit(adapter, persona, "reliability@1", serve, timeout=1.0)
        return
    run = sit(adapter, persona, "reliability@1", serve, timeout=1.0)
    assert len(run.records) == 6
    failed = [r for r in run.records if r.grade.result == "failure"]
    assert failed, "a broken agent must fail some items"
    assert all(r.response.error or r.grade.value == 0 for r in failed)
    if persona in ("crash", "hang"):
        # Only the item the persona breaks on fails; the run recovers for the rest.
        assert [r.item.id for r in failed] == [f"rel-00{1 if persona == 'crash' else 2}"]
