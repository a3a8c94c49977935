"""The Litestar application: wiring settings, storage and services at start-up."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
from collections.abc import AsyncIterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from typing import Any

import asyncpg
from litestar import Controller, Litestar, Request, Response, get
from litestar.di import Provide
from litestar.openapi import OpenAPIConfig
from litestar.openapi.datastructures import ResponseSpec
from litestar.routes import HTTPRoute

from trustscore import __version__
from trustscore.api import openapi
from trustscore.api.addresses import ENTRY_ROUTES, client_address, posts_charged, refuse_cross_origin
from trustscore.api.attestation_routes import AttestationController
from trustscore.api.body_allowance import body_allowance, charged_bodies
from trustscore.api.evidence_routes import EvidenceController
from trustscore.api.fast_append import fast_append
from trustscore.api.head import answer_head
from trustscore.api.integrations import Integrations
from trustscore.api.ladder_routes import LadderController
from trustscore.api.log_routes import LogController
from trustscore.api.pages import PAGE_HANDLERS, templates
from trustscore.api.problems import EXCEPTION_HANDLERS
from trustscore.api.public_routes import PublicController
from trustscore.api.public_url import STATE_KEY as PUBLIC_URL
from trustscore.api.query import check_query
from trustscore.api.scope_routes import ScopeController
from trustscore.api.sitting_routes import SittingController
from trustscore.api.tile_routes import TileController
from trustscore.api.webhook_routes import WebhookController
from trustscore.api.wiring import DEPENDENCIES, STATE_KEY, Services
from trustscore.errors import InvalidInput
from trustscore.exams.loader import ExamDirs
from trustscore.grading import sandbox
from trustscore.ledger import keys
from trustscore.outbound.guard import OutboundPolicy
from trustscore.services import agent_directory, logkey, periodic, service_keys, snapshots
from trustscore.services.attestations import AttestationService
from trustscore.services.grading_queue import QueueLimits
from trustscore.services.intake import Intake
from trustscore.services.ladder import LadderService
from trustscore.services.log import LogService
from trustscore.services.metrics import Metrics
from trustscore.services.pages import PageService
from trustscore.services.periodic import Periodic
from trustscore.services.projector import Projector, rederive
from trustscore.services.public import PublicService
from trustscore.services.ratelimit import KeyRateLimiter
from trustscore.services.rating_mirror import RatingMirror
from trustscore.services.ratings import RatingService, RatingView, load_models
from trustscore.services.reverify import Reverifier, ReverifyConfig
from trustscore.services.scope import ScopeService
from trustscore.services.scope_runs import ScopeRunConfig, ScopeRunner
from trustscore.services.sittings import SittingConfig, SittingService
from trustscore.services.webhooks import WebhookService, after_step, webhook_config
from trustscore.settings import Settings
from trustscore.store import db
from trustscore.store.attestations import AttestationStore
from trustscore.store.ladder import LadderStore
from trustscore.store.leases import Leases, holder_name
from trustscore.store.log import LogStore
from trustscore.store.projection_tables import ProjectionStore
from trustscore.store.ratings import RatingTable
from trustscore.store.reverify import ReverifyStore
from trustscore.store.scope import ScopeStore
from trustscore.store.sittings import SittingStore
from trustscore.store.webhooks import WebhookStore

log = logging.getLogger("trustscore")

#: Every controller of the API (a new one is added here).
CONTROLLERS: list[type[Controller]] = [
    LogController,
    EvidenceController,
    PublicController,
    AttestationController,
    SittingController,
    LadderController,
    ScopeController,
    WebhookController,
    TileController,
]
TEXT = "text/plain; charset=utf-8"
PROMETHEUS = "text/plain; version=0.0.4"  # the Prometheus text exposition format (Litestar adds the charset)


@dataclass
class Wiring:
    """What the app shares with its lifespan: the metrics (from the start) and, once started, the
    services; ``ready`` while the lifespan is between start-up and shutdown."""

    metrics: Metrics = field(default_factory=Metrics)
    services: Services | None = None
    ready: bool = False
    read_pool: asyncpg.Pool | None = None  # the read replica's pool, when reads have their own database


@get("/healthz", operation_id="health", tags=["ops"], media_type="text/plain", sync_to_thread=False)
def health() -> str:
    """Liveness: the process answers."""
    return "ok\n"


def leased(lease: str, *tasks: Periodic) -> list[Periodic]:
    """``tasks`` run only in the process holding ``lease`` (services/periodic.py)."""
    return [dataclasses.replace(t, lease=lease) for t in tasks]


def outbound_policy(settings: Settings, deadline: float) -> OutboundPolicy:
    """The guard for calls to agents' endpoints: the operator's address settings, ``deadline`` per call."""
    return OutboundPolicy(
        read_timeout=min(30.0, deadline),
        total_timeout=deadline,
        allow_loopback=settings.outbound_allow_loopback,
        allow_private=settings.outbound_allow_private,
    )


async def build_services(
    settings: Settings,
    log_key: keys.SigningKey,
    pool: asyncpg.Pool,
    metrics: Metrics,
    per_address: KeyRateLimiter,
    stop: asyncio.Event,
    read_pool: asyncpg.Pool | None = None,
    leases: Leases | None = None,
) -> tuple[Services, list[Periodic]]:
    """Every service, built once in dependency order, and the background tasks that keep them current
    (until ``stop``). Public reads use ``read_pool`` (a streaming replica) when given; writes, background
    work and reads that must see their own writes use ``pool``. The log key must be the one the
    database's log was made with (ConfigError otherwise). The background tasks depend on the role
    (docs/operations.md): ``api`` runs only its ratings mirror (on ``pool``: a replica cannot LISTEN);
    ``worker`` and ``all`` run every singleton job, each under its lease (``leases``).

    Only ``all`` (the one process of a single-machine deployment) catches up at start-up (integration,
    projection, ratings), so that it is ready with projections current; and only while it holds each
    lease, since that is the singleton work itself. A ``worker`` does none of it: its tasks start at once
    and do it when they take the leases. Before, a worker restarted beside a live holder projected and
    published ratings outside the lease, and holding the leases through start-up instead would stop every
    job until the slowest start-up step ended."""
    jobs = settings.role != "api"
    start_current = settings.role == "all"
    store = LogStore(pool)
    bound = await logkey.bind(store, settings.log_origin, log_key)
    reads = None if read_pool is None else LogStore(read_pool)
    if reads is not None:
        await logkey.check_replica(reads, bound)
    service_key = logkey.load_or_create(settings.service_key_file)
    log_service = LogService(
        store,
        log_key,
        settings.log_origin,
        max_batch=settings.max_batch,
        metrics=metrics,
        limiter=KeyRateLimiter(settings.key_rate, settings.key_burst),
        address_limiter=per_address,
        reads=reads,
        tile_cache_bytes=settings.tile_cache_bytes,
    )
    if start_current and (leases is None or await leases.hold("integrator")):
        await log_service.integrate_once(settings.integrate_batch)
    else:
        await log_service.follow_checkpoints()
    await service_keys.register(log_service, service_key)
    log_service.trust_own_key(service_key)
    reverify_key = logkey.load_or_create(settings.reverify_key_file)
    await service_keys.register(
        log_service, reverify_key, "trustscore re-verifier", service_keys.REVERIFY_ROLES
    )
    log_service.trust_own_key(reverify_key)
    projections = ProjectionStore(pool)
    # Workers compute ratings and materialise them; API processes serve the materialised copy.
    models = load_models(names=settings.served_models)
    ratings = RatingService(projections, models, metrics, table=RatingTable(pool)) if jobs else None
    view: RatingView = ratings or RatingMirror(RatingTable(pool), models)
    ladder = LadderService(LadderStore(pool), projections, settings.stats_floor)
    if ratings is not None:
        projector = Projector(
            store,
            projections,
            log_key.public_key,
            ratings,
            ladder_rule=settings.ladder_rule,
            ladder=LadderStore(pool),
            after_step=after_step(ratings.models),  # webhook events, in the projection's transaction
            rating_lag=settings.rating_lag,
        )
        if start_current and (leases is None or await leases.hold("ratings")):
            await projector.load()
            await projector.catch_up()
            await ratings.refresh()  # serve nothing older than what is projected at start-up
        elif start_current:
            # Another process holds the lease (a rolling restart's old instance): serve what is projected
            # so far, not an empty table, and write nothing until this process takes the lease.
            log.warning("ratings lease held by another process: serving the ratings projected so far")
            await ratings.refresh(publish=False)
    if isinstance(view, RatingMirror):
        await view.sync()
    exam_dirs = ExamDirs.from_env()
    sandbox.configure(allow_weak=settings.sandbox_allow_weak)
    isolation = await asyncio.to_thread(sandbox.isolation)
    if isolation.mode != "kernel":
        log.warning("code sandbox: %s (%s)", isolation.mode, isolation.reason)
    reverifier = Reverifier(
        log_service,
        ReverifyStore(pool),
        reverify_key,
        exam_dirs,
        ReverifyConfig(
            k=settings.reverify_k,
            k_private=settings.reverify_k_private,
            k_fresh=settings.reverify_k_fresh,
            deadline_s=settings.reverify_deadline,
            interval=settings.reverify_interval,
            policy=outbound_policy(settings, settings.reverify_deadline),
        ),
        failures=metrics.background_failures,
    )
    scope = ScopeService(ScopeStore(pool))
    scope_runner = ScopeRunner(
        log_service,
        ScopeStore(pool),
        reverify_key,
        exam_dirs,
        ScopeRunConfig(
            interval=settings.scope_interval,
            deadline_s=settings.scope_deadline,
            # one call at most 2 minutes, so one slow item cannot take the whole run's budget
            policy=outbound_policy(settings, min(120.0, settings.scope_deadline)),
            card_interval=settings.sitting_scope_interval,  # the agent's draws: one a period, either way
        ),
        failures=metrics.background_failures,
    )
    public = PublicService(
        log_service,
        projections if read_pool is None else ProjectionStore(read_pool),
        view,
        exam_dirs,
        verifications=reverifier.statuses,
        ladder=ladder.dimensions,
        scope_summary=scope.summary,
        primary=None if read_pool is None else projections,
    )
    sittings = SittingService(
        log_service,
        SittingStore(pool),
        service_key,
        exam_dirs,
        SittingConfig(
            settings.sitting_deadline,
            settings.sitting_max_open,
            settings.sitting_sweep_interval,
            scope_interval_s=settings.sitting_scope_interval,
        ),
    )
    services = Services(
        log=log_service,
        intake=Intake(
            log_service,
            service_key,
            exam_dirs,
            metrics,
            grading=QueueLimits(
                slots=settings.grading_slots,
                max_wait=settings.grading_wait,
                report_budget_s=settings.grading_budget,
            ),
        ),
        public=public,
        attestations=AttestationService(public, AttestationStore(pool), service_key, metrics=metrics),
        sittings=sittings,
        ladder=ladder,
        scope=scope,
        pages=PageService(public, log_service),
        sandbox=isolation,
        webhooks=WebhookService(log_service, WebhookStore(pool), service_key, webhook_config(settings)),
    )
    log.info("trustscore ready (log key %s, service key %s)", keys.key_id(log_key.public_key), service_key.id)
    s = settings
    # Every process learns the checkpoints whoever holds the integrator lease signs: its ratings name the
    # checkpoint covering them, and the re-verification schedule and replica fallback go by it.
    follow = Periodic("checkpoint follower", log_service.follow_checkpoints, s.integrate_interval)
    # A process serving HTTP fills its free proof cache with the newest full tiles at start, then tops it
    # up with tiles made full since (docs/tiles.md); a worker answers no proofs. It also reads every agent
    # card into its directory at start and makes the search's name order, beside its first requests, not
    # in the first page's or search's time (its time grows with the agents), then the cards since now and
    # then.
    warm_ups: list[Periodic] = []
    if s.role != "worker":
        if s.tile_warm_interval > 0:
            warm_ups.append(Periodic("proof cache", log_service.tiles.warm, s.tile_warm_interval))
        warm_ups.append(
            Periodic("agent directory", lambda: public.search.warm(stop), agent_directory.WARM_INTERVAL)
        )

    async def snapshot(due: float) -> None:
        # A worker that has just taken the lease over must not sign its start-up ratings: it first
        # loads what the previous holder projected (the period's nonce allows one snapshot only). The
        # snapshot fills the period ``due`` falls in (periodic.py), however long the refresh takes.
        assert ratings is not None
        await ratings.refresh()
        await snapshots.take(log_service, ratings, service_key, s.snapshot_interval, due)

    if ratings is None:
        assert isinstance(view, RatingMirror)
        return services, [view.periodic(stop), follow, *warm_ups]
    background = [
        follow,
        *warm_ups,
        *leased(
            "integrator",
            Periodic(
                "integrator", lambda: log_service.integrate_pending(s.integrate_batch), s.integrate_interval
            ),
        ),
        # The projector, rating refresh and snapshots share one process's in-memory ratings: one lease.
        Periodic(
            "projector", projector.catch_up, s.project_interval, lease="ratings", on_lease=projector.resume
        ),
        # Evidence decays: every rating is recomputed at a fresh time (the first after one interval).
        Periodic(
            "rating refresh",
            ratings.recompute_all,
            s.rating_refresh_interval,
            s.rating_refresh_interval,
            lease="ratings",
        ),
        Periodic(
            "snapshots",
            snapshot,
            s.snapshot_interval,
            lease="ratings",
            aligned=True,  # one snapshot per period of the interval, whichever worker takes it
        ),
        *leased("sitting expiry", Periodic("sitting expiry", sittings.sweep, s.sitting_sweep_interval)),
        *leased("re-verification", *reverifier.periodic(stop)),
        *leased("scope runs", scope_runner.periodic(stop)),
        *leased("webhook dispatch", services.webhooks.periodic()),
    ]
    return services, background


async def replica_line(log_service: LogService, read_pool: asyncpg.Pool) -> str:
    """One line on the read replica: its checkpoint beside the primary's, and its WAL replay."""
    state = await db.replica_state(read_pool)
    ours = await log_service.reads.latest_checkpoint()
    theirs = await log_service.store.latest_checkpoint()
    size, primary = (0 if ours is None else ours.size), (0 if theirs is None else theirs.size)
    replay = "not a standby" if not state.in_recovery else "standby"
    if state.replay_age_s is not None:
        replay += f", last replayed transaction {state.replay_age_s:.1f} s old"
    return f"replica: checkpoint {size} of {primary} ({primary - size} behind; {replay})"


MAX_NAME = 255  # characters in one path segment (a file name's limit)


def _with_head(methods: AbstractSet[str]) -> set[str]:
    """A route's methods as OPTIONS names them: HEAD wherever GET is (api/head.py)."""
    return {*methods, "HEAD"} if "GET" in methods else set(methods)


def _lower_body_limits(app: Litestar, most: int) -> None:
    """Every route's own body limit (the single-statement routes': evidence_routes.write_route) lowered to
    ``most``, the operator's TRUSTSCORE_MAX_BODY_BYTES, where that is smaller: a route's own limit wins
    over the app's in Litestar, and the report routes' 4 MiB did over an operator's 1 MiB. Each app holds
    copies of the handlers (Litestar copies each it registers: no other app is changed), none of which has
    resolved its limit yet (a request does, the first time). A route without a limit of its own (Empty)
    takes the app's; one of None (no limit) would be lowered too."""
    for route in app.routes:
        if isinstance(route, HTTPRoute):
            for handler in route.route_handlers:
                own = handler.request_max_body_size
                if own is None or (isinstance(own, int) and own > most):
                    handler.request_max_body_size = most


def create_app(settings: Settings, dsn: str) -> Litestar:
    """The app for ``settings`` on the PostgreSQL at ``dsn`` (migrated at start-up)."""
    wiring = Wiring()
    # Writes per client address: a token bucket of entries (burst ``address_burst``, refilled evenly at
    # the per-minute allowance), O(1) per request in bounded memory. Routes that write log entries charge
    # it per new entry through the services (a duplicate costs nothing); other POSTs cost one each, the
    # MCP and A2A mounts' by a guard (the before-request hook below does not see mounts).
    per_address = KeyRateLimiter(
        settings.address_rate_per_minute / 60,
        max(1, min(settings.address_burst, settings.address_rate_per_minute)),
        what="client address",
    )
    # MCP at /mcp, the A2A card and skills, agent search
    integrations = Integrations([posts_charged(per_address)], settings.max_body_bytes)

    @contextlib.asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        await db.migrate(dsn)  # on the primary only: a replica replays the primary's schema
        log_key = logkey.load_or_create(settings.log_key_file)
        if settings.role != "api":  # evidence an earlier release derived is derived again before a load
            await rederive(dsn, log_key.public_key, settings.ladder_rule)
        pool = await db.create_pool(dsn, min_size=settings.pool_min, max_size=settings.pool_max)
        read_pool = None
        stop = asyncio.Event()
        tasks: list[asyncio.Task[None]] = []
        leases = Leases(pool, holder_name(settings.role))
        try:
            if settings.read_database_url:
                read_pool = wiring.read_pool = await db.create_pool(
                    settings.read_database_url,
                    min_size=settings.pool_min,
                    max_size=settings.pool_max,
                    read_only=True,
                )
            services, background = await build_services(
                settings, log_key, pool, wiring.metrics, per_address, stop, read_pool, leases
            )
            wiring.services = services
            app.state[STATE_KEY] = services
            tasks = periodic.start(
                background, stop, wiring.metrics.background_failures, leases, settings.lease_poll
            )
            wiring.ready = True
            yield
        finally:
            wiring.ready = False
            app.state.pop(STATE_KEY, None)
            stop.set()
            for task in tasks:
                await task
            if wiring.services is not None and isinstance(wiring.services.public.ratings, RatingMirror):
                await wiring.services.public.ratings.close()
            await leases.close()
            if read_pool is not None:
                await read_pool.close()
            await pool.close()

    @get(
        "/readyz",
        operation_id="ready",
        tags=["ops"],
        media_type="text/plain",
        responses={
            503: ResponseSpec(str, description="starting, or a database unreachable", media_type=TEXT)
        },
    )
    async def ready() -> Response[str]:
        """Readiness: migrated, keys bound, projections caught up at start (role ``all``; a worker catches
        up when it takes the leases), database reachable (and the read replica, when set, with how far it
        lags); the second line says which code sandbox is in force (``kernel``, ``weak`` or ``refused``)."""
        services = wiring.services
        if not wiring.ready or services is None:
            return Response("starting\n", status_code=503)
        try:
            await services.log.store.sequenced_size()
        except Exception:
            return Response("database unreachable\n", status_code=503)
        iso = services.sandbox
        lines = [f"sandbox: {iso.mode} ({iso.reason or iso.mechanisms})"]
        if wiring.read_pool is not None:
            try:
                lines.append(await replica_line(services.log, wiring.read_pool))
            except Exception:
                return Response("read database unreachable\n", status_code=503)
        return Response("ready\n" + "".join(line + "\n" for line in lines))

    @get("/metrics", operation_id="metrics", tags=["ops"], media_type=PROMETHEUS, sync_to_thread=False)
    def metrics() -> Response[str]:
        """Prometheus metrics in the text exposition format 0.0.4: ingest, grading and rating latency,
        counts."""
        return Response(wiring.metrics.render().decode(), media_type=PROMETHEUS)

    allowed: dict[str, str] = {}  # route path -> its Allow header, filled once the app is built

    async def before_handler(request: Request[Any, Any, Any]) -> Response[None] | None:
        """OPTIONS is answered here with every method of the path (Litestar's own answer lists only the
        methods registered before the path's first handler: ``OPTIONS /v1/log/entries`` omitted GET).
        Every query string is checked (trustscore.api.query). POSTs that write no log entries cost one
        each; those that do need a token left and are charged per entry by the services (reads are not
        limited here; a rate of 0 takes nothing)."""
        path = request.scope["path"]
        if "\x00" in path:  # no id, index or file name holds one; PostgreSQL refuses it
            raise InvalidInput("the path must not contain NUL (%00)")
        if len(path) > MAX_NAME and any(len(part) > MAX_NAME for part in path.split("/")):
            # no id, index or file name is that long; the static files' lookup raised (a 500, review)
            raise InvalidInput(f"a path segment is longer than {MAX_NAME} characters")
        if request.method == "OPTIONS":
            path = next(iter(request.route_handler.paths), "")
            return Response(None, status_code=204, headers={"Allow": allowed.get(path, "OPTIONS")})
        check_query(request)
        if request.method != "POST":
            return None
        refuse_cross_origin(request)
        # The router has set scope["path"] to the path it matched, normalised and without the root path
        # (``request.url.path`` puts the root path back: behind --root-path no entry route matched it).
        if request.scope["path"] in ENTRY_ROUTES:
            per_address.check(client_address(request))
        else:
            per_address.take(client_address(request))
        return None

    # A worker serves only its health, readiness and metrics (docs/operations.md, "Roles and leases").
    serving = settings.role != "worker"
    app = Litestar(
        route_handlers=[
            health,
            ready,
            metrics,
            *((*CONTROLLERS, *PAGE_HANDLERS, *integrations.handlers) if serving else ()),
        ],
        dependencies={
            **DEPENDENCIES,
            **integrations.dependencies,
            "max_page": Provide(lambda: settings.max_page, sync_to_thread=False),
            "max_page_bytes": Provide(lambda: settings.max_page_bytes, sync_to_thread=False),
            "feed_length": Provide(lambda: settings.feed_length, sync_to_thread=False),
        },
        # after the services' lifespan: it reads them
        lifespan=[lifespan, integrations.lifespan] if serving else [lifespan],
        exception_handlers=EXCEPTION_HANDLERS,
        template_config=templates(),
        before_request=before_handler,
        request_max_body_size=settings.max_body_bytes,
        openapi_config=OpenAPIConfig(
            title="trustscore", version=__version__, path="/schema", render_plugins=openapi.renderings()
        ),
        logging_config=None,  # logging is configured by the process (trustscore.logs), not the app
    )
    _lower_body_limits(app, settings.max_body_bytes)
    app.asgi_handler = answer_head(app.asgi_handler)
    if serving:
        app.asgi_handler = fast_append(app.asgi_handler, app.state, per_address, settings.max_body_bytes)
    # Outermost: a body's bytes are charged before any of the app reads them (fast_append included).
    bodies = body_allowance(settings.address_rate_per_minute, per_address.burst, settings.max_body_bytes)
    app.asgi_handler = charged_bodies(app.asgi_handler, bodies)
    app.state[PUBLIC_URL] = settings.public_url.rstrip("/") if settings.public_url else None
    allowed.update(
        (r.path, ", ".join(sorted(_with_head(r.methods)))) for r in app.routes if isinstance(r, HTTPRoute)
    )
    openapi.finish(app.openapi_schema, settings.served_models)  # built once here, served as finished
    return app
