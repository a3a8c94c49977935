"""run_once against the scripted example agents over real local HTTP, through the outbound guard."""

from __future__ import annotations

import datetime as dt
import json
import socket
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from trustscore import canonical
from trustscore.exams.loader import DEFAULT_PUBLIC_DIR, ExamDirs, load_exam
from trustscore.exams.model import ExamSet
from trustscore.exams.reporting import grade_report
from trustscore.kinds.exam_report import ExamReport
from trustscore.kinds.graded import GradedItem
from trustscore.kinds.reverification import Reverification, sampling
from trustscore.ledger import keys, statements
from trustscore.outbound.guard import OutboundPolicy
from trustscore.outbound.reverify_runner import RunResult, build_statement, run_once
from trustscore.reverify.recheck import recheck
from trustscore.sdk import agent_from_spec, run_exam
from trustscore.sdk.runner import sign_run

AGENTS = DEFAULT_PUBLIC_DIR.parent / "examples" / "agents"
KEY = keys.SigningKey.from_seed(b"\x07" * 32)
VERIFIER = keys.SigningKey.from_seed(b"\x08" * 32)
POLICY = OutboundPolicy(allow_loopback=True, connect_timeout=2, read_timeout=5, total_timeout=5)
ROOT = b"\x11" * 32
REPORT_SHA = b"\x22" * 32
SEED = sampling.seed(ROOT, REPORT_SHA, KEY.id)

Served = Callable[[str, str], str]


def report_of(persona: str, exam_ref: str) -> tuple[ExamSet, ExamReport, list[GradedItem]]:
    """A signed report of ``persona`` sitting ``exam_ref`` in-process, and the server's grades of it."""
    exam = load_exam(exam_ref, ExamDirs(DEFAULT_PUBLIC_DIR, None))
    run = run_exam(exam, agent_from_spec(f"python:{AGENTS / 'scripted.py'}:{persona}"), timeout_s=10)
    parsed = statements.parse_statement(canonical.b64decode(sign_run(run, KEY).payload))
    report = parsed.predicate
    assert isinstance(report, ExamReport)
    graded = [
        GradedItem(
            item_id=g.item_id,
            dimension=g.dimension,
            grader=g.grader,
            value_millis=g.grade.value,
            result=g.grade.result,
        )
        for g in grade_report(report, exam)
    ]
    return exam, report, graded


@pytest.fixture(scope="module")
def good_negotiation() -> tuple[ExamSet, ExamReport, list[GradedItem]]:
    return report_of("good", "negotiation@1")


@pytest.fixture
def private_probe(tmp_path: Path) -> ExamSet:
    """The public security set republished as a private-tier set (the server's never-published items)."""
    data = json.loads((DEFAULT_PUBLIC_DIR / "security" / "v1.json").read_text())
    data.update(name="probe", tier="private")
    for item in data["items"]:
        item["tier"] = "private"
    (tmp_path / "probe").mkdir()
    (tmp_path / "probe" / "v1.json").write_text(json.dumps(data))
    return load_exam("probe@1", ExamDirs(DEFAULT_PUBLIC_DIR, tmp_path))


def _statement(run: RunResult, report: ExamReport, endpoint: str) -> Reverification:
    payload = build_statement(
        run,
        verifier=VERIFIER.id,
        report=report,
        report_index=5,
        report_sha256=REPORT_SHA,
        endpoint=endpoint,
        trigger="report",
        checkpoint_size=7,
        checkpoint_root=ROOT,
        history=[],
        ran_at=statements.format_time(dt.datetime.now(dt.UTC)),
    )
    r = statements.parse_statement(payload).predicate
    assert isinstance(r, Reverification)
    return r


def test_an_honest_agent_matches_its_own_report(
    serve: Served, good_negotiation: tuple[ExamSet, ExamReport, list[GradedItem]], private_probe: ExamSet
) -> None:
    exam, report, graded = good_negotiation
    endpoint = serve("good", "plain") + "/agent"
    run = run_once(report, exam, graded, endpoint, POLICY, SEED, 6, [private_probe], 3)
    assert (run.comparison.outcome, run.comparison.matched_millis) == ("match", 1000)
    assert [i.item_id for i in run.items] == sampling.sample([i.item_id for i in report.items], 6, SEED)
    # negotiation items are dialogues: the whole conversation went back and forth through the endpoint
    assert all(i.error is None and i.observed_millis == i.reported_millis for i in run.items)
    assert [(p.exam, p.dimension, p.value_millis, p.result) for p in run.private_items] == [
        ("probe@1", "security", 1000, "success")
    ] * 3
    r = _statement(run, report, endpoint)
    assert (r.outcome, r.security_observed, r.security_status) == ("match", "pass", "passed")
    recheck(
        report_index=5,
        report_sha256=REPORT_SHA,
        report_item_ids=[i.item_id for i in report.items],
        agent=KEY.id,
        checkpoint_size=7,
        checkpoint_root=ROOT,
        statement=r,
        private_pool=[sampling.private_ref("probe@1", i.id) for i in private_probe.items],
    )


def test_an_endpoint_answering_differently_mismatches(
    serve: Served, good_negotiation: tuple[ExamSet, ExamReport, list[GradedItem]]
) -> None:
    exam, report, graded = good_negotiation
    endpoint = serve("careless", "plain") + "/agent"
    run = run_once(report, exam, graded, endpoint, POLICY, SEED, 10, [], 0)
    assert run.comparison.outcome == "mismatch"
    assert run.comparison.matched_millis < 900
    assert all(i.observed_millis is not None and i.error is None for i in run.items)
    assert _statement(run, report, endpoint).outcome == "mismatch"


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_a_down_endpoint_is_unreachable_quickly(
    good_negotiation: tuple[ExamSet, ExamReport, list[GradedItem]], private_probe: ExamSet
) -> None:
    exam, report, graded = good_negotiation
    endpoint = f"http://127.0.0.1:{_closed_port()}/agent"
    start = time.monotonic()
    run = run_once(report, exam, graded, endpoint, POLICY, SEED, 10, [private_probe], 3)
    assert time.monotonic() - start < 5
    assert (run.comparison.outcome, run.comparison.matched_millis) == ("unreachable", 0)
    assert all(i.observed_millis is None and i.error for i in run.items)
    assert all(p.value_millis is None and p.error for p in run.private_items)
    assert "not asked" in (run.items[-1].error or "")
    r = _statement(run, report, endpoint)
    assert (r.outcome, r.security_observed) == ("unreachable", "none")


def test_a_refused_endpoint_is_recorded_not_raised(
    good_negotiation: tuple[ExamSet, ExamReport, list[GradedItem]],
) -> None:
    exam, report, graded = good_negotiation
    strict = OutboundPolicy(connect_timeout=2, read_timeout=5, total_timeout=5)  # loopback not allowed
    run = run_once(report, exam, graded, "http://127.0.0.1:9/agent", strict, SEED, 3)
    assert run.comparison.outcome == "unreachable"
    assert "loopback" in (run.items[0].error or "")


def test_a_hanging_item_is_cut_by_the_policy(
    serve: Served, good_negotiation: tuple[ExamSet, ExamReport, list[GradedItem]]
) -> None:
    exam, report, graded = good_negotiation
    quick = OutboundPolicy(allow_loopback=True, connect_timeout=1, read_timeout=1, total_timeout=1)
    start = time.monotonic()
    run = run_once(report, exam, graded, serve("hang", "plain") + "/agent", quick, SEED, 10)
    assert time.monotonic() - start < 15
    [hung] = [i for i in run.items if i.item_id == "neg-002"]
    assert hung.observed_millis is None and "time limits" in (hung.error or "")
    assert run.comparison.outcome == "match"  # nine of ten: one slow item is within the tolerance


def test_fresh_instances_expose_an_agent_that_memorised_the_public_set(serve: Served) -> None:
    """The bluffer answers the public items of capability@1 from memory and invents answers to the fresh
    ones: the fresh items land as private items after the drawn ones, anyone can recheck them with the
    re-verifier's public key, and the public-vs-private gap shows."""
    from trustscore.reverify import fresh, status

    exam, report, graded = report_of("good", "capability@1")
    planned = fresh.plan(exam.id, SEED, 3, VERIFIER.sign)
    endpoint = serve("bluffer", "plain") + "/agent"  # memorised public answers, invents the rest
    run = run_once(report, exam, graded, endpoint, POLICY, SEED, 6, [], 0, fresh_items=planned)
    assert [(p.exam, p.item_id, p.exam_digest) for p in run.private_items] == [
        (f.generator, f.item.id, f.digest) for f in planned
    ]
    r = _statement(run, report, endpoint)
    fresh.check(
        exam.id, SEED, [(p.exam, p.item_id, p.exam_digest) for p in r.private_items], VERIFIER.public_key
    )
    assert status.private_gap(r) is not None


def test_stalling_on_public_items_cannot_run_out_the_clock_before_private_ones(
    serve: Served, good_negotiation: tuple[ExamSet, ExamReport, list[GradedItem]], private_probe: ExamSet
) -> None:
    """review-integrity: the run asked the report's public items first and private items only while its
    deadline lasted. A lookup agent that answers public items slowly (each within its own time limit)
    had every private item recorded "not asked", so no public-private gap could be measured and it
    stayed verified. Private items are asked first now: the run's first private item is always asked."""
    exam, report, graded = good_negotiation
    quick = OutboundPolicy(allow_loopback=True, connect_timeout=1, read_timeout=1, total_timeout=1)
    run = run_once(
        report, exam, graded, serve("hang", "plain") + "/agent", quick, SEED, 10, [private_probe], 3,
        deadline_s=0.5,
    )  # fmt: skip
    assert not (run.private_items[0].error or "").startswith("not asked")
    assert run.private_items[0].value_millis is not None or run.private_items[0].error
