"""Webhooks and feeds over HTTP (docs/webhooks.md): subscribe or revoke (signed statements), a
subscription's delivery attempts, the key deliveries are signed with, and Atom feeds of the events."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import Controller, Request, Response, get
from litestar.di import NamedDependency
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import FromPath, Parameter, QueryParameter

from trustscore.api.addresses import client_address
from trustscore.api.evidence_routes import AppendedOut, write_route
from trustscore.api.openapi import MAX_INDEX, READ_PROBLEMS, STARTING
from trustscore.api.public_url import public_base
from trustscore.api.query import DECIMAL
from trustscore.canonical import b64encode
from trustscore.errors import InvalidInput
from trustscore.kinds.parties import check_key_id
from trustscore.kinds.subscriptions import MAX_SUBSCRIPTION_BYTES
from trustscore.ledger import statements
from trustscore.services.webhooks import WebhookService
from trustscore.webhooks import feeds, schedule

Webhooks = NamedDependency[WebhookService]
FeedLength = NamedDependency[int]  # Settings.feed_length
FEED = ResponseSpec(str, description="an Atom 1.0 feed", media_type=feeds.MEDIA_TYPE)


class AttemptOut(msgspec.Struct):
    event_id: str
    type: str
    agent: str
    attempt: int
    at: str
    status: int | None  # the receiver's HTTP status, null when it did not answer
    error: str | None
    millis: int
    state: str  # the delivery now: pending (will retry), delivered, or dead (dead-lettered)


class DeliveriesPage(msgspec.Struct):
    subscription: int
    pending: int
    delivered: int
    dead: int
    attempts: list[AttemptOut]  # newest event first, then newest attempt first
    next: str | None  # the cursor of the next page (SEQ.ATTEMPT), None on the last page


class WebhookKey(msgspec.Struct):
    key_id: str
    public_key: str  # whpk_ + base64 of the Ed25519 key: verify ``v1a`` signatures with it
    max_attempts: int


def parse_cursor(text: str | None) -> tuple[int, int] | None:
    """A deliveries cursor ``SEQ.ATTEMPT``; None (the newest) when absent."""
    if text is None:
        return None
    seq, dot, attempt = text.partition(".")
    if not (
        dot and DECIMAL.fullmatch(seq) and DECIMAL.fullmatch(attempt) and len(seq) <= 18 and len(attempt) <= 9
    ):
        raise InvalidInput("after must be a cursor of the form SEQ.ATTEMPT from a previous page")
    return (int(seq), int(attempt))


class WebhookController(Controller):
    tags = ["webhooks"]  # noqa: RUF012 - Litestar class attribute

    @write_route(
        "/v1/subscriptions",
        "subscribe",
        "a subscription/v1 or subscription-revocation/v1 statement signed by the registered subscriber",
        MAX_SUBSCRIPTION_BYTES,
        duplicate=AppendedOut,
    )
    async def subscribe(self, request: Request[Any, Any, Any], webhooks: Webhooks) -> Response[AppendedOut]:
        """Subscribe to webhook events (the entry's log index is the subscription's id) or revoke one.
        The URL must pass the outbound policy now: loopback and private targets are refused (400)
        unless the operator allows them."""
        a = await webhooks.subscribe(await request.body(), client_address(request))
        out = AppendedOut(a.index, b64encode(a.leaf_hash), a.duplicate)
        return Response(out, status_code=200 if a.duplicate else 201)

    @get(
        "/v1/subscriptions/{index:int}/deliveries",
        operation_id="getDeliveries",
        responses=READ_PROBLEMS,
    )
    async def deliveries(
        self,
        webhooks: Webhooks,
        index: Annotated[
            int, Parameter(ge=0, le=MAX_INDEX, description="the subscription's id: its log index")
        ],
        after: Annotated[
            str | None, QueryParameter(description="the previous page's `next` cursor (SEQ.ATTEMPT)")
        ] = None,
        limit: Annotated[int, QueryParameter(ge=1, le=1000)] = 100,
    ) -> DeliveriesPage:
        """Every delivery attempt of a subscription with its outcome, newest first, paged; with the
        number of deliveries pending, delivered and dead-lettered."""
        rows = await webhooks.attempts(index, parse_cursor(after), limit)
        counts = await webhooks.store.counts(index)
        items = [
            AttemptOut(
                a.event_id,
                a.type,
                a.agent,
                a.attempt,
                statements.format_time(a.at),
                a.status,
                a.error,
                a.millis,
                a.state,
            )
            for a in rows
        ]
        cursor = f"{rows[-1].event_seq}.{rows[-1].attempt}" if len(rows) == limit else None
        return DeliveriesPage(
            index,
            counts.get("pending", 0),
            counts.get("delivered", 0),
            counts.get("dead", 0),
            items,
            cursor,
        )

    @get("/v1/webhooks/key", operation_id="getWebhookKey", sync_to_thread=False, responses=STARTING)
    def key(self, webhooks: Webhooks) -> WebhookKey:
        """The service key every webhook is signed with (Standard Webhooks ``v1a``, Ed25519)."""
        return WebhookKey(
            webhooks.key.id, webhooks.public_key, webhooks.config.max_attempts or schedule.MAX_ATTEMPTS
        )

    @get("/feed.atom", operation_id="getFeed", media_type=feeds.MEDIA_TYPE, responses={200: FEED, **STARTING})
    async def feed(
        self, request: Request[Any, Any, Any], webhooks: Webhooks, feed_length: FeedLength
    ) -> Response[bytes]:
        """An Atom feed of the newest events about every agent."""
        events = await webhooks.events(None, feed_length)
        return _atom("urn:trustscore:feed", "trustscore: all agents", request, events)

    @get(
        "/agents/{agent_id:str}/feed.atom",
        operation_id="getAgentFeed",
        media_type=feeds.MEDIA_TYPE,
        responses={200: FEED, **READ_PROBLEMS},
    )
    async def agent_feed(
        self,
        request: Request[Any, Any, Any],
        webhooks: Webhooks,
        agent_id: FromPath[str],
        feed_length: FeedLength,
    ) -> Response[bytes]:
        """An Atom feed of the newest events about one agent."""
        check_key_id(agent_id, what="agent id")
        events = await webhooks.events(agent_id, feed_length)
        return _atom(f"urn:trustscore:feed:{agent_id}", f"trustscore: {agent_id}", request, events)


def _atom(feed_id: str, title: str, request: Request[Any, Any, Any], events: list[Any]) -> Response[bytes]:
    """The feed, its self link under the service's public URL (api/public_url.py)."""
    base, headers = public_base(request)
    query = request.scope.get("query_string", b"").decode("latin-1")
    url = base + request.scope["path"] + (f"?{query}" if query else "")
    entries = [feeds.FeedEntry(e.id, e.type, e.agent, e.at, e.payload) for e in events]
    return Response(feeds.atom(feed_id, title, url, entries), media_type=feeds.MEDIA_TYPE, headers=headers)
