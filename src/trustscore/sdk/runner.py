"""Sit an exam: put every item to the agent, record what it said and grade it client-side.

An agent that crashes, hangs or answers garbage fails items; it never ends the run — except that an
agent that answers no item at all, or cannot even be reached for the first :data:`ABORT_AFTER` items,
stops the run with :class:`AgentUnavailable` and no report. Text that cannot be encoded (lone
surrogates) is replaced by U+FFFD per answer and noted on the item. Client-side grades are
information only: the server re-grades the recorded responses with the same graders.
"""

from __future__ import annotations

import datetime as dt
import re
import time
from collections.abc import Callable
from dataclasses import dataclass

from trustscore.errors import AgentUnavailable
from trustscore.exams.model import ExamSet
from trustscore.exams.reporting import build_report
from trustscore.grading import Grade, Item, Response, Turn, get_grader, grade_item
from trustscore.grading.model import failure
from trustscore.kinds.exam_report import ReportItem
from trustscore.ledger import dsse, keys
from trustscore.ledger.statements import format_time
from trustscore.sdk.adapters import Agent, AgentFailure, AgentRequest, AgentUnreachable, Message

MAX_OUTPUT = 64 * 1024  # longer replies are cut to this many characters before they are recorded
MAX_DIALOGUE_TURNS = 64
ABORT_AFTER = 3  # a run whose first this-many items could not reach the agent stops at once
_SURROGATE = re.compile("[\ud800-\udfff]")

Progress = Callable[[int, int, str], None]
#: The counterpart of a dialogue item: its next message after the agent's outputs so far, or None.
Dialogue = Callable[[Item, list[str]], str | None]
NOT_GRADED = failure("not graded client-side (the server grades this sitting)")


@dataclass(frozen=True)
class ItemRecord:
    item: Item
    response: Response
    grade: Grade
    notes: tuple[str, ...] = ()  # what the runner changed or noticed (e.g. replaced characters)
    unreachable: bool = False  # no answer because the agent could not be reached at all


@dataclass(frozen=True)
class RunResult:
    exam: ExamSet
    adapter: str
    started_at: str
    elapsed_ms: int
    records: list[ItemRecord]


def _ms(start: float) -> int:
    return int((time.monotonic() - start) * 1000)


def valid_text(text: str) -> tuple[str, int]:
    """``text`` with every surrogate code point (which UTF-8 cannot encode) replaced by U+FFFD, and how
    many were replaced."""
    return _SURROGATE.subn("\ufffd", text)


class _Asker:
    """Asks one item's questions, stopping at the first failure."""

    def __init__(self, exam: ExamSet, agent: Agent, item: Item, timeout_s: float) -> None:
        self.exam, self.agent, self.item, self.timeout_s = exam, agent, item, timeout_s
        self.turns: list[Turn] = []
        self.error: str | None = None
        self.replaced = 0
        self.unreachable = False

    def ask(self, messages: list[Message]) -> str | None:
        request = AgentRequest(self.exam.id, self.item.id, len(self.turns), messages)
        start = time.monotonic()
        try:
            output, replaced = valid_text(self.agent.ask(request, self.timeout_s)[:MAX_OUTPUT])
        except AgentFailure as exc:
            self.error = valid_text(exc.message)[0]
            self.unreachable = isinstance(exc, AgentUnreachable)
            return None
        self.replaced += replaced
        self.turns.append(Turn(output, _ms(start)))
        return output


def _sit_item(
    exam: ExamSet, agent: Agent, item: Item, timeout_s: float, counterpart: Dialogue | None = None
) -> Response:
    """Put one item to the agent (shared with re-verification); see :func:`_sit_item_noted`."""
    return _sit_item_noted(exam, agent, item, timeout_s, counterpart)[0]


def _sit_item_noted(
    exam: ExamSet, agent: Agent, item: Item, timeout_s: float, counterpart: Dialogue | None = None
) -> tuple[Response, tuple[str, ...], bool]:
    """The item's response, notes on what the runner changed, and whether the agent was unreachable."""
    asker = _Asker(exam, agent, item, timeout_s)
    system = Message("system", exam.file.instructions)
    if item.ask.kind == "dialogue":
        dialogue = counterpart or get_grader(item.grader).dialogue
        assert dialogue is not None
        first = dialogue(item, [])
        messages = [system, Message("user", f"{item.ask.prompts[0]}\n\n{first}")]
        outputs: list[str] = []
        while len(outputs) < MAX_DIALOGUE_TURNS:
            out = asker.ask(messages)
            if out is None:
                break
            outputs.append(out)
            reply = dialogue(item, outputs)
            if reply is None:
                break
            messages = [*messages, Message("assistant", out), Message("user", reply)]
    else:
        prompts = item.ask.prompts * item.ask.times if item.ask.kind == "repeat" else item.ask.prompts
        for prompt in prompts:
            if asker.ask([system, Message("user", prompt)]) is None:
                break
    notes = (
        (f"replaced {asker.replaced} invalid characters (lone surrogates) with U+FFFD",)
        if asker.replaced
        else ()
    )
    return Response(asker.turns, asker.error), notes, asker.unreachable and not asker.turns


def run_exam(
    exam: ExamSet,
    agent: Agent,
    *,
    timeout_s: float | None = None,
    progress: Progress | None = None,
    counterpart: Dialogue | None = None,
    grade: bool = True,
) -> RunResult:
    """Put every item of ``exam`` to ``agent``; ``timeout_s`` overrides each item's own per-ask timeout.

    ``counterpart`` plays dialogue items instead of the local grader (a server sitting, whose hidden
    arguments the client never has); with ``grade`` False no item is graded client-side."""
    started_at = format_time(dt.datetime.now(dt.UTC))
    start = time.monotonic()
    records: list[ItemRecord] = []
    for n, item in enumerate(exam.items):
        if progress:
            progress(n, len(exam.items), item.id)
        limit = timeout_s if timeout_s is not None else exam.timeout_ms(item) / 1000
        response, notes, unreachable = _sit_item_noted(exam, agent, item, limit, counterpart)
        graded = grade_item(item, response) if grade else NOT_GRADED
        records.append(ItemRecord(item, response, graded, notes, unreachable))
        if len(records) == min(ABORT_AFTER, len(exam.items)) and all(r.unreachable for r in records):
            raise _unavailable(agent, records, len(exam.items))
    if not any(r.response.turns for r in records):
        raise _unavailable(agent, records, len(exam.items))
    if progress:
        progress(len(exam.items), len(exam.items), "")
    return RunResult(exam, agent.label, started_at, _ms(start), records)


def _unavailable(agent: Agent, records: list[ItemRecord], total: int) -> AgentUnavailable:
    first = next((r.response.error for r in records if r.response.error), None) or "no reason given"
    return AgentUnavailable(
        f"agent {agent.label} gave no answer to any of the {'first ' if len(records) < total else ''}"
        f"{len(records)} items ({' '.join(first.split())[:300]}); no report written"
    )


def sign_run(run: RunResult, key: keys.SigningKey) -> dsse.Envelope:
    """The signed exam report of ``run``."""
    items = [
        ReportItem(r.item.id, r.response.turns, r.response.error, r.grade.value, r.grade.result)
        for r in run.records
    ]
    return build_report(
        run.exam, items, adapter=run.adapter, started_at=run.started_at, elapsed_ms=run.elapsed_ms, key=key
    )
