"""Evidence in over HTTP: exam reports, settlements and marketplace events (all signed)."""

from __future__ import annotations

from typing import Any

import msgspec
from litestar import Controller, Request, Response, post
from litestar.di import NamedDependency
from litestar.openapi.datastructures import ResponseSpec

from trustscore.api.addresses import client_address
from trustscore.api.openapi import WRITE_PROBLEMS, envelope_body
from trustscore.canonical import b64encode
from trustscore.kinds.events import MAX_EVENT_BYTES
from trustscore.kinds.exam_report import MAX_REPORT_BYTES
from trustscore.kinds.settlements import MAX_SETTLEMENT_BYTES
from trustscore.services.intake import Intake
from trustscore.store.log import Appended


class GradedItemOut(msgspec.Struct):
    item_id: str
    dimension: str
    grader: str
    value_millis: int
    result: str
    detail: str


class ReportResponse(msgspec.Struct):
    report_index: int
    evidence_index: int
    exam: str
    items: list[GradedItemOut]
    duplicate: bool = False  # the same answers were already logged: these are the first report's indexes


class AppendedOut(msgspec.Struct):
    index: int
    leaf_hash: str
    duplicate: bool


def _out(a: Appended) -> Response[AppendedOut]:
    """201 when written; 200 with the first index when the statement was already in the log."""
    return Response(
        AppendedOut(a.index, b64encode(a.leaf_hash), a.duplicate), status_code=200 if a.duplicate else 201
    )


IntakeDep = NamedDependency[Intake]


def write_route(
    path: str, operation_id: str, what: str, max_body: int | None, duplicate: type | None = None
) -> post:
    """A POST route taking one signed envelope of ``what`` (described in OpenAPI by hand); with
    ``duplicate``, it answers 200 with that body when the statement was already in the log.

    ``max_body`` bounds the body read, from what the largest legal statement of the kind needs (the app
    lowers it to TRUSTSCORE_MAX_BODY_BYTES when that is smaller: app.py). Before 2026-12-07 these routes
    read and parsed up to the app's 16 MiB on the event loop for one token of the sender's rate (~50 ms
    of the whole process a request); None keeps the app's limit (a work record may legally be ~16 MB)."""
    limit: dict[str, Any] = {} if max_body is None else {"request_max_body_size": max_body}
    again = {} if duplicate is None else {200: ResponseSpec(duplicate, description="already in the log")}
    return post(
        path,
        operation_id=operation_id,
        status_code=201,
        operation_class=envelope_body(what),
        responses={**again, **WRITE_PROBLEMS},
        **limit,  # (None would mean no limit at all, not the app's)
    )


class EvidenceController(Controller):
    path = "/v1"
    tags = ["evidence in"]  # noqa: RUF012 - Litestar class attribute

    @write_route(
        "/reports",
        "submitReport",
        "an exam-report/v1 statement signed by the registered agent",
        MAX_REPORT_BYTES,
        duplicate=ReportResponse,
    )
    async def report(self, request: Request[Any, Any, Any], intake: IntakeDep) -> Response[ReportResponse]:
        """Submit a signed exam report. The server re-grades every response itself and logs the report
        with its own signed graded evidence; client-side grades are ignored. A report is its answers:
        the same responses to the same exam version again (any nonce) answer 200 with the first report's
        indexes and write nothing; a reused nonce on other answers is refused (409)."""
        g = await intake.report(await request.body(), client_address(request))
        items = [
            GradedItemOut(i.item_id, i.dimension, i.grader, i.grade.value, i.grade.result, i.grade.detail)
            for i in g.grades
        ]
        out = ReportResponse(g.report.index, g.evidence.index, g.exam, items, g.duplicate)
        return Response(out, status_code=200 if g.duplicate else 201)

    @write_route(
        "/settlements",
        "submitSettlement",
        "a settlement/v1 statement signed by the party reporting it",
        MAX_SETTLEMENT_BYTES,
        duplicate=AppendedOut,
    )
    async def settlement(self, request: Request[Any, Any, Any], intake: IntakeDep) -> Response[AppendedOut]:
        """Submit a settlement signed by the party reporting it (docs/evidence-mapping.md). A statement
        already in the log answers 200 with its first index and costs nothing."""
        return _out(await intake.settlement(await request.body(), client_address(request)))

    @write_route(
        "/events",
        "submitEvent",
        "an event/v1 statement signed by a registered marketplace",
        MAX_EVENT_BYTES,
        duplicate=AppendedOut,
    )
    async def event(self, request: Request[Any, Any, Any], intake: IntakeDep) -> Response[AppendedOut]:
        """Submit a marketplace event signed by a registered marketplace key (200 for a duplicate)."""
        return _out(await intake.event(await request.body(), client_address(request)))
