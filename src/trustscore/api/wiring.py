"""The services a running app holds, and the typed providers that hand them to route handlers.

The lifespan of :func:`trustscore.api.app.create_app` builds one :class:`Services` (every field set)
and puts it in the app's state; until then, and after shutdown, every provider answers 503 ("the
service is starting"). Handlers name their dependency by its key in :data:`DEPENDENCIES`.
"""

from __future__ import annotations

from dataclasses import dataclass

from litestar.datastructures import State
from litestar.di import Provide

from trustscore.errors import StorageError
from trustscore.grading.sandbox import Isolation
from trustscore.services.attestations import AttestationService
from trustscore.services.intake import Intake
from trustscore.services.ladder import LadderService
from trustscore.services.log import LogService
from trustscore.services.pages import PageService
from trustscore.services.public import PublicService
from trustscore.services.scope import ScopeService
from trustscore.services.sittings import SittingService
from trustscore.services.webhooks import WebhookService

STATE_KEY = "services"


@dataclass(frozen=True)
class Services:
    """Everything the routes use, built once at start-up."""

    log: LogService
    intake: Intake
    public: PublicService
    attestations: AttestationService
    sittings: SittingService
    ladder: LadderService
    scope: ScopeService
    pages: PageService
    sandbox: Isolation
    webhooks: WebhookService


def services_of(state: State) -> Services:
    """The running app's services; 503 while it starts or stops."""
    services = state.get(STATE_KEY)
    if not isinstance(services, Services):
        raise StorageError("the service is starting")
    return services


def log_service(state: State) -> LogService:
    return services_of(state).log


def intake(state: State) -> Intake:
    return services_of(state).intake


def public(state: State) -> PublicService:
    return services_of(state).public


def attestations(state: State) -> AttestationService:
    return services_of(state).attestations


def sittings(state: State) -> SittingService:
    return services_of(state).sittings


def ladder(state: State) -> LadderService:
    return services_of(state).ladder


def scope(state: State) -> ScopeService:
    return services_of(state).scope


def pages(state: State) -> PageService:
    return services_of(state).pages


def webhooks(state: State) -> WebhookService:
    return services_of(state).webhooks


#: Dependency key (the handler's parameter name) -> its provider.
DEPENDENCIES: dict[str, Provide] = {
    "log_service": Provide(log_service, sync_to_thread=False),
    "intake": Provide(intake, sync_to_thread=False),
    "public": Provide(public, sync_to_thread=False),
    "attestations": Provide(attestations, sync_to_thread=False),
    "sittings": Provide(sittings, sync_to_thread=False),
    "ladder": Provide(ladder, sync_to_thread=False),
    "scope_honesty": Provide(scope, sync_to_thread=False),
    "pages": Provide(pages, sync_to_thread=False),
    "webhooks": Provide(webhooks, sync_to_thread=False),
}
