"""The badge and the rating history: the two API routes the pages are built on (docs/pages.md)."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import Controller, Request, get
from litestar.di import NamedDependency
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.spec import OpenAPIHeader, OpenAPIType, Parameter, Schema
from litestar.params import FromPath, QueryParameter
from litestar.response.base import ASGIResponse

from trustscore.api.conditional import etag_matches
from trustscore.api.openapi import MAX_INDEX, READ_PROBLEMS, operation_class
from trustscore.api.public_routes import MODEL_PARAMETER, PUBLIC, Model
from trustscore.api.wiring import services_of
from trustscore.ledger import statements
from trustscore.services.pages import MAX_HISTORY, PageService

Pages = NamedDependency[PageService]

SVG = "image/svg+xml"
BADGE_CACHE = "public, max-age=60"  # a README badge follows a rating within a minute
DIMENSION_PARAMETER = Parameter(
    name="dimension",
    param_in="query",
    required=False,
    description="one dimension's score instead of the total",
    schema=Schema(type=OpenAPIType.STRING),
)
BADGE_HEADERS = {
    "ETag": OpenAPIHeader(schema=Schema(type=OpenAPIType.STRING), description="the badge's digest"),
    "Cache-Control": OpenAPIHeader(schema=Schema(type=OpenAPIType.STRING)),
}


class HistoryPoint(msgspec.Struct):
    index: int  # the log entry of the snapshot statement (prove it with /v1/log/proof/inclusion)
    at: str
    total: int | None
    adjusted: int | None


class HistoryOut(msgspec.Struct):
    agent: str
    model_version: str
    points: list[HistoryPoint]
    next: int | None  # pass as ``from`` for the next page; None on the last page


class PagesApiController(Controller):
    path = "/v1"
    tags = ["public"]  # noqa: RUF012 - Litestar class attribute

    @get(
        "/agents/{agent_id:str}/badge.svg",
        operation_id="getBadge",
        operation_class=operation_class(parameters=[MODEL_PARAMETER, DIMENSION_PARAMETER]),
        responses={
            200: ResponseSpec(
                str,
                description="a shields-style SVG badge; grey `unknown` for an agent without a card",
                media_type=SVG,
                generate_examples=False,
            ),
            304: ResponseSpec(None, description="If-None-Match matched the badge's ETag"),
            **READ_PROBLEMS,
        },
    )
    async def badge(self, request: Request[Any, Any, Any]) -> ASGIResponse:
        """An embeddable badge: total and grade (or one dimension's score) with the verified mark. A
        well-formed id the bureau does not know gets the grey ``unknown`` badge (200); a malformed id,
        model or dimension is a 400 problem, as anywhere in the API. Like the rating route it takes only
        the request (no dependency or parameter parsing): badges are read as often as ratings."""
        made = await services_of(request.app.state).pages.badge(
            request.path_params["agent_id"],
            request.query_params.get("model"),
            request.query_params.get("dimension"),
        )
        headers = {"etag": made.etag, "cache-control": BADGE_CACHE}
        # Read from the raw ASGI headers: building the request's Headers costs more than the rest.
        asked = next((v for k, v in request.scope["headers"] if k == b"if-none-match"), None)
        if asked is not None and etag_matches(asked.decode("latin-1"), made.etag):
            return ASGIResponse(status_code=304, headers=headers)
        headers["content-type"] = SVG
        return ASGIResponse(body=made.svg, headers=headers)

    @get(
        "/agents/{agent_id:str}/rating/history",
        operation_id="getRatingHistory",
        cache_control=PUBLIC,
        responses=READ_PROBLEMS,
    )
    async def history(
        self,
        pages: Pages,
        agent_id: FromPath[str],
        model: Model = None,
        from_index: Annotated[
            int, QueryParameter(name="from", ge=0, le=MAX_INDEX, description="first log index (inclusive)")
        ] = 0,
        to_index: Annotated[
            int, QueryParameter(name="to", ge=0, le=MAX_INDEX, description="last log index (exclusive)")
        ] = MAX_INDEX,
        limit: Annotated[int, QueryParameter(ge=1, le=MAX_HISTORY)] = 100,
    ) -> HistoryOut:
        """The agent's logged rating snapshots under a model, oldest first, each with the log index that
        proves it; at most ``limit`` (1..1000) a page, paged on with ``next``."""
        h = await pages.history(agent_id, model, from_index, to_index, limit)
        points = [HistoryPoint(p.index, statements.format_time(p.at), p.total, p.adjusted) for p in h.points]
        return HistoryOut(h.agent, h.model_version, points, h.next)
