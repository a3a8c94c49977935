"""Fresh exam sittings over HTTP: open one, play its dialogues, report it, read its state."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import Controller, Request, get, post
from litestar.di import NamedDependency
from litestar.params import JSONBody, Parameter

from trustscore.api.evidence_routes import GradedItemOut, write_route
from trustscore.api.openapi import MAX_INDEX, READ_PROBLEMS, WRITE_PROBLEMS
from trustscore.kinds.sittings import MAX_REQUEST_BYTES
from trustscore.ledger import statements
from trustscore.services.sittings import MAX_DIALOGUE_BYTES, PublicItem, SittingService

Sittings = NamedDependency[SittingService]
#: A sitting's log index, bounded like every index (a larger one overflowed PostgreSQL's bigint: a 500).
SittingIndex = Annotated[int, Parameter(ge=0, le=MAX_INDEX)]


class OpenedOut(msgspec.Struct):
    sitting: int  # log index of the sitting-open statement; name it in the report
    request_index: int
    exam: str
    deadline: str
    instructions: str
    items: list[PublicItem]  # prompts only: answers, tests, floors and secrets stay on the server
    token: str  # authorises this sitting's dialogue moves; keep it private


class DialogueIn(msgspec.Struct, forbid_unknown_fields=True):
    token: str
    item_id: str
    outputs: list[str]  # every move played so far in this item, plus at most one new one


class DialogueOut(msgspec.Struct):
    message: str | None  # the counterpart's next message; null once the dialogue has ended


class ClosedOut(msgspec.Struct):
    sitting: int
    report_index: int
    close_index: int
    items: list[GradedItemOut]


class SittingOut(msgspec.Struct):
    sitting: int
    agent: str
    exam: str
    state: str  # open | closed
    deadline: str
    close_index: int | None


class SittingController(Controller):
    path = "/v1/sittings"
    tags = ["sittings"]  # noqa: RUF012 - Litestar class attribute

    @write_route(
        "", "openSitting", "a sitting-request/v1 statement signed by the registered agent", MAX_REQUEST_BYTES
    )
    async def open_sitting(self, request: Request[Any, Any, Any], sittings: Sittings) -> OpenedOut:
        """Open a fresh sitting of an exam: the server logs the request and its commitment, and answers
        with freshly generated prompts and a deadline. Unreported sittings close as failures."""
        o = await sittings.open(await request.body())
        return OpenedOut(o.sitting, o.request_index, o.exam, o.deadline, o.instructions, o.items, o.token)

    @post(
        "/{index:int}/dialogue",
        operation_id="playSittingDialogue",
        responses=WRITE_PROBLEMS,
        request_max_body_size=MAX_DIALOGUE_BYTES,
    )
    async def dialogue(
        self, index: SittingIndex, data: JSONBody[DialogueIn], sittings: Sittings
    ) -> DialogueOut:
        """Play a dialogue item's next move; the server's counterpart answers. Moves cannot be taken back."""
        return DialogueOut(await sittings.dialogue(index, data.token, data.item_id, data.outputs))

    @write_route(
        "/{index:int}/report",
        "reportSitting",
        "a sitting-report/v1 statement signed by the agent",
        None,  # the app's: a sitting report's answers are not capped per answer like an exam report's
    )
    async def report(
        self, index: SittingIndex, request: Request[Any, Any, Any], sittings: Sittings
    ) -> ClosedOut:
        """Report a sitting (once, before its deadline): the server regenerates and grades its items and
        logs the report with a sitting-close statement revealing the secret and the grades."""
        c = await sittings.report(index, await request.body())
        items = [
            GradedItemOut(g.item_id, g.dimension, g.grader, g.grade.value, g.grade.result, g.grade.detail)
            for g in c.grades
        ]
        return ClosedOut(c.sitting, c.report_index, c.close_index, items)

    @get("/{index:int}", operation_id="getSitting", responses=READ_PROBLEMS)
    async def state(self, index: SittingIndex, sittings: Sittings) -> SittingOut:
        """A sitting's state; once closed, the close statement's index (the secret and grades are there)."""
        row = await sittings.status(index)
        if row.open_index is None or row.state not in ("open", "closed"):
            from trustscore.errors import NotFound

            raise NotFound(f"there is no sitting at log index {index}")
        return SittingOut(
            row.open_index, row.agent, row.exam, row.state, statements.format_time(row.deadline),
            row.close_index if row.close_index is None or row.close_index >= 0 else None,
        )  # fmt: skip
