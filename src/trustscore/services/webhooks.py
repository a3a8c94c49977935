"""Webhooks: subscription intake, the delivery dispatcher, and the reads behind deliveries and feeds.

The dispatcher sends each due delivery from the PostgreSQL outbox (store/webhooks.py) through the guarded
outbound client, signed per Standard Webhooks with the service key (``v1a``, Ed25519): at least once,
one at a time and in order per (subscription, agent), retried with exponential backoff and jitter, and
dead-lettered after ``max_attempts``. docs/webhooks.md is the contract.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass

from trustscore.errors import InvalidInput, NotFound, RateLimited, TrustscoreError
from trustscore.kinds.subscriptions import SUBSCRIPTION_KINDS, Subscription, SubscriptionRevocation
from trustscore.ledger import audit
from trustscore.ledger.keys import SigningKey
from trustscore.outbound.guard import (
    OutboundFailed,
    OutboundPolicy,
    OutboundRefused,
    SafeClient,
    check_url,
    post_bytes,
    safe_client,
)
from trustscore.scoring.weights import Weights
from trustscore.services.log import LogService
from trustscore.services.periodic import Periodic
from trustscore.services.ratelimit import KeyRateLimiter
from trustscore.settings import Settings
from trustscore.store.log import Appended
from trustscore.store.projection_tables import AfterStep
from trustscore.store.webhooks import Attempt, Conn, Due, StoredEvent, WebhookStore, derive
from trustscore.webhooks import schedule, signing

log = logging.getLogger(__name__)
MAX_ERROR = 300  # characters of an attempt's error kept


@dataclass(frozen=True)
class WebhookConfig:
    """The dispatcher's limits (Settings fields ``webhook_*``)."""

    policy: OutboundPolicy
    interval: float = 0.5  # seconds between dispatch rounds when nothing was due
    max_attempts: int = schedule.MAX_ATTEMPTS
    backoff_base: float = schedule.BASE_S
    backoff_cap: float = schedule.CAP_S
    rate: float = 10.0  # deliveries per second per subscription
    burst: int = 50
    batch: int = 200  # deliveries claimed per round
    concurrency: int = 16  # requests in flight at once


def webhook_config(settings: Settings) -> WebhookConfig:
    """The dispatcher's limits from the server's settings; targets obey the outbound allowances."""
    timeout = settings.webhook_timeout
    policy = OutboundPolicy(
        connect_timeout=min(5.0, timeout),
        read_timeout=timeout,
        total_timeout=timeout,
        max_response_bytes=64 * 1024,
        allow_loopback=settings.outbound_allow_loopback,
        allow_private=settings.outbound_allow_private,
    )
    return WebhookConfig(
        policy,
        interval=settings.webhook_interval,
        max_attempts=settings.webhook_max_attempts,
        backoff_base=settings.webhook_backoff_base,
        backoff_cap=settings.webhook_backoff_cap,
        rate=settings.webhook_rate,
        burst=settings.webhook_burst,
    )


class WebhookService:
    def __init__(
        self, log_service: LogService, store: WebhookStore, key: SigningKey, config: WebhookConfig
    ) -> None:
        self.log = log_service
        self.store = store
        self.key = key
        self.config = config
        self.limiter = KeyRateLimiter(config.rate, config.burst, what="subscription")

    # --- subscriptions ----------------------------------------------------------------------------------

    async def subscribe(self, body: bytes, address: str | None = None) -> Appended:
        """Admit a signed subscription or revocation: a subscription's URL must pass the outbound policy
        now (loopback and private targets refused unless the operator allows them); a revocation must be
        signed by the subscriber of a subscription that exists."""
        [prepared] = self.log.parse_body(body, kinds=SUBSCRIPTION_KINDS, single=True)
        p = prepared.statement.predicate
        if isinstance(p, Subscription):
            try:
                await asyncio.to_thread(check_url, p.url, self.config.policy)
            except OutboundFailed as exc:
                raise OutboundRefused(f"subscription url: {exc}") from exc
        elif isinstance(p, SubscriptionRevocation):
            owner = (await self.subscription_at(p.subscription)).subscriber
            if owner != p.subscriber:
                raise InvalidInput(f"subscription {p.subscription} belongs to {owner}, not {p.subscriber}")
        [appended] = await self.log.append([prepared], batch=False, address=address)
        return appended

    async def subscription_at(self, index: int) -> Subscription:
        """The subscription logged at ``index`` (read from the log: it may not be projected yet)."""
        found = await self.log.store.entries(index, index + 1)
        p = audit.parse_leaf(found[0].leaf).statement.predicate if found else None
        if not isinstance(p, Subscription):
            raise NotFound(f"no subscription at log index {index}")
        return p

    async def attempts(self, sid: int, before: tuple[int, int] | None, limit: int) -> list[Attempt]:
        await self.subscription_at(sid)
        return await self.store.attempts(sid, before, limit)

    async def events(self, agent: str | None, limit: int) -> list[StoredEvent]:
        return await self.store.events(agent, limit)

    @property
    def public_key(self) -> str:
        return signing.public_key_text(self.key.public_key)

    # --- dispatch ---------------------------------------------------------------------------------------

    async def dispatch_once(self) -> int:
        """One round: send every due head of queue (up to ``batch``); return how many were attempted."""
        due = await self.store.due(self.config.batch)
        if not due:
            return 0
        gate = asyncio.Semaphore(self.config.concurrency)
        with safe_client(self.config.policy) as client:  # the guard is synchronous: calls run in threads
            sent = await asyncio.gather(*(self._deliver(client, d, gate) for d in due))
        return sum(sent)

    async def _deliver(self, client: SafeClient, d: Due, gate: asyncio.Semaphore) -> int:
        try:
            self.limiter.take(str(d.subscription))
        except RateLimited:
            return 0  # stays due; tried again next round, its attempts not counted
        async with gate:
            hdrs = signing.headers(self.key, d.event_id, int(time.time()), d.payload)
            started = time.perf_counter()
            status: int | None = None
            error: str | None = None
            try:
                headers = {**hdrs, "content-type": "application/json"}
                policy = self.config.policy
                status = await asyncio.to_thread(
                    post_bytes, client, d.url, d.payload, policy, headers=headers
                )
                if not 200 <= status < 300:
                    error = f"HTTP {status}"
            except TrustscoreError as exc:
                error = (str(exc).splitlines() or [type(exc).__name__])[0][:MAX_ERROR]
            millis = int((time.perf_counter() - started) * 1000)
        attempt = d.attempts + 1
        if error is None:
            state, wait = "delivered", 0.0
        elif attempt >= self.config.max_attempts:
            state, wait = "dead", 0.0
            log.warning(
                "webhook %s to subscription %d dead after %d attempts: %s",
                d.event_id,
                d.subscription,
                attempt,
                error,
            )
        else:
            state = "pending"
            wait = schedule.backoff(attempt, base=self.config.backoff_base, cap=self.config.backoff_cap)
        if not await self.store.record(d, status, error, millis, state, wait):
            log.info("webhook %s to subscription %d: attempt %d was recorded by another dispatcher",
                     d.event_id, d.subscription, attempt)  # fmt: skip
        return 1

    async def step(self, max_rounds: int = 100) -> int:
        """One periodic step (services/periodic.py): if this process holds the deployment's dispatch lock
        (one sender keeps per-agent order), dispatch rounds back to back while work is due; return how
        many deliveries were attempted. The lock is its session's: before each round after the first the
        session is confirmed, so a dispatcher whose lock connection was lost (another may be sending
        now) stops after the round in hand instead of sending beside the other until nothing is due."""
        done = 0
        async with self.store.pool.acquire() as conn, self.store.dispatch_lock(conn) as locked:
            if not locked:
                return 0
            for round_ in range(max_rounds):
                if round_:
                    await self.store.confirm(conn)
                sent = await self.dispatch_once()
                done += sent
                if not sent:
                    break
        return done

    def periodic(self) -> Periodic:
        return Periodic("webhook dispatch", self.step, self.config.interval)


def after_step(models: Mapping[str, Weights]) -> AfterStep:
    """The projector hook that records the webhook events of each projection step (same transaction);
    grades are those of the served ``models``."""

    def grade_of(model: str, total: int) -> str | None:
        w = models.get(model)
        return None if w is None else w.grade(total)

    async def hook(conn: Conn, start: int, end: int) -> int:
        return await derive(conn, start, end, grade_of)

    return hook
