"""Run one re-verification: ask the sampled items again through the outbound guard, grade, compare.

The endpoint is asked exactly as the SDK's HTTP adapter asks (docs/sdk.md: ``POST`` the request JSON,
``{"output": ...}`` back; dialogue items pass the whole conversation), but every call goes through
:func:`trustscore.outbound.guard.post_json`, so a hostile URL cannot reach the server's network and a slow
one cannot hang the worker. Refusals and failures are recorded on the item. The grades come from the
same grader versions as the report's (the exam set is checked by digest). docs/reverification.md.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

import msgspec

from trustscore.errors import InvalidInput, VerificationError
from trustscore.exams.forms import sitting_exam
from trustscore.exams.model import ExamSet
from trustscore.grading import Item, Response, grade_item
from trustscore.kinds.exam_report import ExamReport
from trustscore.kinds.graded import GradedItem
from trustscore.kinds.reverification import (
    MAX_ERROR,
    PrivateItem,
    Reverification,
    ReverifiedItem,
    Trigger,
    compare,
    make_reverification,
    run_nonce,
    sampling,
)
from trustscore.outbound.guard import (
    OutboundFailed,
    OutboundPolicy,
    OutboundRefused,
    SafeClient,
    post_json,
    safe_client,
)
from trustscore.reverify import status
from trustscore.reverify.fresh import FreshItem
from trustscore.sdk.adapters import AgentFailure, AgentRequest
from trustscore.sdk.runner import _sit_item  # the SDK's asking loop, multi-turn dialogues included

#: Stop asking once this many items in a row got no answer at all and none has been answered yet.
UNREACHABLE_AFTER = 2


class GuardedHttpAgent:
    """The SDK's plain HTTP agent API over the outbound guard; refusals and failures become AgentFailure."""

    def __init__(self, url: str, policy: OutboundPolicy, client: SafeClient) -> None:
        self.url, self.policy, self._client = url, policy, client
        self.label = f"http:{url}"

    def ask(self, request: AgentRequest, timeout_s: float) -> str:
        """``timeout_s`` is the item's budget; the policy's timeouts bound every call regardless."""
        try:
            body = post_json(self._client, self.url, msgspec.to_builtins(request), self.policy)
        except (OutboundRefused, OutboundFailed) as exc:
            raise AgentFailure(exc.message) from exc
        output = body.get("output") if isinstance(body, dict) else None
        if not isinstance(output, str):
            raise AgentFailure('agent did not answer {"output": "..."}')
        return output

    def close(self) -> None:
        pass  # the client belongs to the caller


@dataclass(frozen=True)
class RunResult:
    items: list[ReverifiedItem]
    private_items: list[PrivateItem]
    comparison: compare.Comparison
    elapsed_ms: int


def _error(text: str | None) -> str | None:
    if text is None:
        return None
    clean = "".join(c if c.isprintable() else " " for c in text).strip() or "failed"
    return clean[:MAX_ERROR]


class _Asker:
    """Asks items one by one and gives up on an endpoint that has answered nothing so far."""

    def __init__(self, agent: GuardedHttpAgent, deadline: float | None) -> None:
        self.agent, self.deadline = agent, deadline
        self.answered_any, self.silent_in_a_row = False, 0

    def ask(self, exam: ExamSet, item: Item) -> Response:
        if not self.answered_any and self.silent_in_a_row >= UNREACHABLE_AFTER:
            return Response(
                [], f"not asked: the endpoint answered none of the first {UNREACHABLE_AFTER} items"
            )
        if self.deadline is not None and time.monotonic() >= self.deadline:
            return Response([], "not asked: the run's deadline passed")
        response = _sit_item(exam, self.agent, item, exam.timeout_ms(item) / 1000)
        if response.turns:
            self.answered_any, self.silent_in_a_row = True, 0
        else:
            self.silent_in_a_row += 1
        return response


def _check_inputs(report: ExamReport, exam: ExamSet, graded: dict[str, GradedItem]) -> None:
    if (report.exam, report.exam_version, report.exam_digest) != (exam.name, exam.version, exam.digest):
        raise VerificationError(
            f"report is for {report.exam}@{report.exam_version}, not {exam.id} ({exam.digest})"
        )
    for ri in report.items:
        item, g = exam.item(ri.item_id), graded.get(ri.item_id)
        if item is None or g is None:
            raise InvalidInput(f"item {ri.item_id!r} is missing from {exam.id} or from the graded evidence")
        if g.grader != item.grader:
            raise VerificationError(
                f"item {item.id}: graded with {g.grader}, the exam set says {item.grader}"
            )


def run_once(
    report: ExamReport,
    exam: ExamSet,
    graded_items: Sequence[GradedItem],
    endpoint: str,
    policy: OutboundPolicy,
    seed: bytes,
    k: int,
    private_exams: Sequence[ExamSet] = (),
    k_private: int = 0,
    *,
    deadline_s: float | None = None,
    fresh_items: Sequence[FreshItem] = (),
) -> RunResult:
    """Ask ``endpoint`` the ``k`` sampled items of ``report``, ``k_private`` sampled private items and the
    run's ``fresh_items`` (:mod:`trustscore.reverify.fresh`), recorded as private items after the others.

    ``graded_items`` is the server's graded evidence for the report (the reported grades). Never raises
    for anything the endpoint does; items past ``deadline_s`` (seconds) are recorded as not asked.
    """
    graded = {g.item_id: g for g in graded_items}
    _check_inputs(report, exam, graded)
    if k < 1:
        raise InvalidInput("a re-verification asks at least one item (k >= 1)")
    start = time.monotonic()
    public = sampling.sample([ri.item_id for ri in report.items], k, seed)
    pool = {sampling.private_ref(e.id, i.id): (e, i) for e in private_exams for i in e.items}
    private = sampling.sample(list(pool), k_private, sampling.private_seed(seed))
    items: list[ReverifiedItem] = []
    private_items: list[PrivateItem] = []
    with safe_client(policy) as client:
        asker = _Asker(
            GuardedHttpAgent(endpoint, policy, client), None if deadline_s is None else start + deadline_s
        )
        # Private and fresh items first: an agent that knows the public items cannot stall on them until
        # the run's deadline leaves no time for the others (docs/reverification.md).
        for ref in private:
            pexam, pitem = pool[ref]
            response = asker.ask(pexam, pitem)
            grade = grade_item(pitem, response) if response.turns else None
            private_items.append(
                PrivateItem(
                    exam=pexam.id,
                    exam_digest=pexam.digest,
                    item_id=pitem.id,
                    dimension=pitem.dimension,
                    grader=pitem.grader,
                    value_millis=None if grade is None else grade.value,
                    result="failure" if grade is None else grade.result,
                    error=_error(response.error),
                )
            )
        fresh_exam = sitting_exam(exam, [f.item for f in fresh_items]) if fresh_items else exam
        for fresh in fresh_items:
            response = asker.ask(fresh_exam, fresh.item)
            grade = grade_item(fresh.item, response) if response.turns else None
            private_items.append(
                PrivateItem(
                    exam=fresh.generator,
                    exam_digest=fresh.digest,
                    item_id=fresh.item.id,
                    dimension=fresh.item.dimension,
                    grader=fresh.item.grader,
                    value_millis=None if grade is None else grade.value,
                    result="failure" if grade is None else grade.result,
                    error=_error(response.error),
                )
            )
        for item_id in public:
            item = exam.item(item_id)
            assert item is not None  # checked above
            response = asker.ask(exam, item)
            observed = grade_item(item, response).value if response.turns else None
            reported = graded[item_id].value_millis
            items.append(
                ReverifiedItem(
                    item_id=item_id,
                    dimension=item.dimension,
                    reported_millis=reported,
                    observed_millis=observed,
                    matched=compare.item_matches(reported, observed),
                    error=_error(response.error),
                )
            )
    comparison = compare.compare([(i.item_id, i.reported_millis, i.observed_millis) for i in items])
    return RunResult(items, private_items, comparison, int((time.monotonic() - start) * 1000))


def build_statement(
    run: RunResult,
    *,
    verifier: str,
    report: ExamReport,
    report_index: int,
    report_sha256: bytes,
    endpoint: str,
    trigger: Trigger,
    checkpoint_size: int,
    checkpoint_root: bytes,
    history: Sequence[Reverification],
    ran_at: str,
) -> bytes:
    """The statement of ``run``, with the nonce of its run id and the security status after ``history``."""
    seed = sampling.seed(checkpoint_root, report_sha256, report.agent)
    expected = sampling.sample([ri.item_id for ri in report.items], len(run.items), seed)
    if [i.item_id for i in run.items] != expected:
        raise VerificationError("the run asked a different sample than this checkpoint seeds")
    return make_reverification(
        verifier=verifier,
        agent=report.agent,
        report_index=report_index,
        report_sha256=report_sha256.hex(),
        exam=report.exam,
        exam_version=report.exam_version,
        exam_digest=report.exam_digest,
        endpoint=endpoint,
        trigger=trigger,
        checkpoint_size=checkpoint_size,
        checkpoint_root=checkpoint_root,
        items=run.items,
        private_items=run.private_items,
        security_before=status.security_state(history),
        ran_at=ran_at,
        nonce=run_nonce(report.agent, report_index, seed),
    )
