"""The Litestar application: wiring settings, storage and services at start-up."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass

from litestar import Litestar, get
from litestar.di import Provide
from litestar.openapi import OpenAPIConfig

from trustscore import __version__
from trustscore.api.log_routes import LogController
from trustscore.api.problems import EXCEPTION_HANDLERS
from trustscore.services import logkey
from trustscore.services.log import LogService
from trustscore.settings import Settings
from trustscore.store import db
from trustscore.store.log import LogStore


@dataclass
class Runtime:
    """What the app holds while running; filled in by the lifespan."""

    log_service: LogService | None = None


@get("/healthz", operation_id="health", tags=["ops"], media_type="text/plain")
async def health() -> str:
    """Liveness: the process answers."""
    return "ok\n"


def create_app(settings: Settings, dsn: str) -> Litestar:
    """The app for ``settings`` on the PostgreSQL at ``dsn`` (migrated at start-up)."""
    runtime = Runtime()

    @contextlib.asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        await db.migrate(dsn)
        pool = await db.create_pool(dsn, min_size=settings.pool_min, max_size=settings.pool_max)
        stop = asyncio.Event()
        task: asyncio.Task[None] | None = None
        try:
            store = LogStore(pool)
            key = logkey.load_or_create(settings.log_key_file)
            await logkey.bind(store, settings.log_origin, key)
            service = LogService(store, key, settings.log_origin, max_batch=settings.max_batch)
            await service.integrate_once(settings.integrate_batch)
            runtime.log_service = service
            task = asyncio.create_task(
                service.run_integrator(settings.integrate_interval, stop, settings.integrate_batch)
            )
            yield
        finally:
            stop.set()
            if task is not None:
                await task
            await pool.close()

    def provide_log_service() -> LogService:
        assert runtime.log_service is not None
        return runtime.log_service

    return Litestar(
        route_handlers=[LogController, health],
        dependencies={
            "log_service": Provide(provide_log_service, sync_to_thread=False),
            "max_page": Provide(lambda: settings.max_page, sync_to_thread=False),
        },
        lifespan=[lifespan],
        exception_handlers=EXCEPTION_HANDLERS,
        request_max_body_size=settings.max_body_bytes,
        openapi_config=OpenAPIConfig(title="trustscore", version=__version__, path="/schema"),
    )
