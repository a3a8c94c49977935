"""The evidence ladder over HTTP: work records in, outcome stats out (docs/evidence-ladder.md)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from litestar import Controller, Request, Response, get
from litestar.di import NamedDependency
from litestar.params import QueryParameter

from trustscore.api.addresses import client_address
from trustscore.api.evidence_routes import AppendedOut, IntakeDep, write_route
from trustscore.api.openapi import MAX_INDEX, READ_PROBLEMS, STALE_PAGE
from trustscore.canonical import b64encode
from trustscore.ladder.stats import MAX_FLOOR, MAX_GROUP_NAME, MAX_GROUPS, OutcomeStats
from trustscore.services.ladder import LadderService

Ladder = NamedDependency[LadderService]


class LadderController(Controller):
    path = "/v1"
    tags = ["evidence ladder"]  # noqa: RUF012 - Litestar class attribute

    @write_route(
        "/work-records",
        "submitWorkRecord",
        "a work-record/v1 statement signed by the agent (self) or a confirming ci/counterparty/marketplace",
        None,  # the app's limit: 1,000 runs and artifacts of long commands and paths may legally be ~16 MB
    )
    async def work_record(self, request: Request[Any, Any, Any], intake: IntakeDep) -> Response[AppendedOut]:
        """Submit a work record: a unit of work with the evidence it left. The server assigns its rung by
        a versioned rule; 200 with the first index when the statement is already in the log."""
        a = await intake.work_record(await request.body(), client_address(request))
        out = AppendedOut(a.index, b64encode(a.leaf_hash), a.duplicate)
        return Response(out, status_code=200 if a.duplicate else 201)

    @get("/stats/outcomes", operation_id="getOutcomeStats", responses={**READ_PROBLEMS, **STALE_PAGE})
    async def outcomes(
        self,
        ladder: Ladder,
        group_by: Annotated[
            Literal["model", "adapter", "exam", "marketplace", "repo"],
            QueryParameter(description="the field rows are grouped by"),
        ],
        floor: Annotated[
            int | None,
            QueryParameter(
                ge=1, le=MAX_FLOOR, description="suppress groups of fewer rows (default: server's)"
            ),
        ] = None,
        limit: Annotated[
            int, QueryParameter(ge=1, le=MAX_GROUPS, description="groups at most, in name order")
        ] = MAX_GROUPS,
        after: Annotated[
            str | None,
            QueryParameter(
                max_length=MAX_GROUP_NAME, description="start after this group name (a page's `next`)"
            ),
        ] = None,
        log_size: Annotated[
            int | None,
            QueryParameter(
                ge=0,
                le=MAX_INDEX,
                description="the first page's log_size: later pages from the same tally (409 once gone)",
            ),
        ] = None,
    ) -> OutcomeStats:
        """The verified share (rung >= 3) per group with n beside every row. A group below the floor is
        suppressed with the reason; a group whose rows detect no outcome has rate null with
        ``no_outcome_detection`` (null is not zero). Never pass or fail, never a comparison. Groups come
        in name order, at most ``limit`` (1000) an answer; ``next``, when present, is the ``after`` of
        the next page, to be asked with the first page's ``log_size`` (model and adapter names are free
        text: there may be many)."""
        return await ladder.outcomes(group_by, floor, limit, after, log_size)
