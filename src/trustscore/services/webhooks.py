"""Webhooks: subscription intake, the delivery dispatcher, and the reads behind deliveries and feeds.

The dispatcher sends each due delivery from the PostgreSQL outbox (store/webhooks.py) through the guarded
outbound client, signed per Standard Webhooks with the service key (``v1a``, Ed25519): at least once,
one at a time and in order per (subscription, agent), retried with exponential backoff and jitter, and
dead-lettered after ``max_attempts``. The guarded client is synchronous: its calls run in the
dispatcher's own threads (never the process's default pool, which grading and attestations share), at
most ``host_concurrency`` of them for one URL host, and a slow delivery holds back only the deliveries
behind it in its own queue. docs/webhooks.md is the contract.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import time
from collections import Counter
from collections.abc import AsyncIterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from trustscore.errors import Conflict, InvalidInput, NotFound, RateLimited, TrustscoreError
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
from trustscore.store.webhooks import Attempt, Conn, Due, KeptSubscriptions, StoredEvent, WebhookStore, derive
from trustscore.webhooks import schedule, signing
from trustscore.webhooks.matching import host_key

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
    concurrency: int = 16  # requests in flight at once (the dispatcher's own threads)
    host_concurrency: int = 4  # requests in flight at once to one URL host
    max_subscriptions: int = 100  # active subscriptions one subscriber may hold


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
        host_concurrency=settings.webhook_host_concurrency,
        max_subscriptions=settings.webhook_max_subscriptions,
    )


class _Sender:
    """The threads and client of one dispatch step; dropped (idle threads end) when the step ends. The
    client is made at the step's first delivery: making one costs ~18 ms of CPU (its TLS context), and an
    idle dispatcher steps twice a second (made at every step, it cost reports ~15 % of their rate)."""

    def __init__(self, threads: ThreadPoolExecutor, policy: OutboundPolicy) -> None:
        self.threads = threads
        self._policy = policy
        self._client: SafeClient | None = None

    @property
    def client(self) -> SafeClient:
        if self._client is None:
            self._client = safe_client(self._policy)
        return self._client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()


class WebhookService:
    def __init__(
        self, log_service: LogService, store: WebhookStore, key: SigningKey, config: WebhookConfig
    ) -> None:
        self.log = log_service
        self.store = store
        self.key = key
        self.config = config
        self.limiter = KeyRateLimiter(config.rate, config.burst, what="subscription")
        self._admitting = asyncio.Lock()  # count and append of one subscription at a time (the cap)
        self._sender: _Sender | None = None
        self._flight: dict[tuple[int, int], tuple[str, asyncio.Task[int]]] = {}  # (sub, seq): host, task
        self._hosts: Counter[str] = Counter()  # deliveries in flight per URL host

    # --- subscriptions ----------------------------------------------------------------------------------

    async def subscribe(self, body: bytes, address: str | None = None) -> Appended:
        """Admit a signed subscription or revocation: a subscription's URL must pass the outbound policy
        now (loopback and private targets refused unless the operator allows them); a revocation must be
        signed by the subscriber of a subscription that exists. A subscriber holds at most
        ``max_subscriptions`` subscriptions not revoked (counted from the log, one admission at a time)."""
        [prepared] = self.log.parse_body(body, kinds=SUBSCRIPTION_KINDS, single=True)
        p = prepared.statement.predicate
        if isinstance(p, Subscription):
            try:
                await asyncio.to_thread(check_url, p.url, self.config.policy)
            except OutboundFailed as exc:
                raise OutboundRefused(f"subscription url: {exc}") from exc
            async with self._admitting:
                held = await self.store.open_subscriptions(p.subscriber)
                if held >= self.config.max_subscriptions:
                    raise Conflict(
                        f"subscriber {p.subscriber} holds {held} active subscriptions, the most allowed "
                        f"(TRUSTSCORE_WEBHOOK_MAX_SUBSCRIPTIONS = {self.config.max_subscriptions}); "
                        "revoke one first"
                    )
                [appended] = await self.log.append([prepared], batch=False, address=address)
            return appended
        if isinstance(p, SubscriptionRevocation):
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
        """One round: start sending the due heads of queue not in flight yet, as far as the limits allow
        (``concurrency`` in all, ``host_concurrency`` per URL host, the rate per subscription); return how
        many were started. Within :meth:`step` it does not wait for them (the step does); alone, it does."""
        if self._sender is None:
            async with self._sending():
                started = await self._start_due()
                await self._drain()
            return started
        return await self._start_due()

    async def _start_due(self) -> int:
        self._reap()
        free = self.config.concurrency - len(self._flight)
        if free <= 0:
            return 0
        due = await self.store.due(self.config.batch, self.config.host_concurrency, list(self._flight))
        started = 0
        for d in due:
            host = host_key(d.url)
            if started == free or self._hosts[host] >= self.config.host_concurrency:
                continue
            try:
                self.limiter.take(str(d.subscription))
            except RateLimited:
                continue  # stays due; tried again next round, its attempts not counted
            self._hosts[host] += 1
            self._flight[(d.subscription, d.event_seq)] = (host, asyncio.create_task(self._deliver(d)))
            started += 1
        return started

    def _reap(self) -> None:
        """Forget the deliveries that are done; raise the first failure among them (recording failed)."""
        failed: BaseException | None = None
        for key, (host, task) in list(self._flight.items()):
            if task.done():
                del self._flight[key]
                self._hosts[host] -= 1
                if self._hosts[host] <= 0:
                    del self._hosts[host]
                if not task.cancelled() and task.exception() is not None and failed is None:
                    failed = task.exception()
        if failed is not None:
            raise failed

    async def _drain(self) -> None:
        while self._flight:
            await asyncio.wait([t for _, t in self._flight.values()])
            self._reap()

    async def _landed(self) -> None:
        """Wait until a delivery in flight is done, or ``interval`` passed (new deliveries may be due)."""
        if self._flight:
            tasks = [t for _, t in self._flight.values()]
            await asyncio.wait(tasks, timeout=self.config.interval, return_when=asyncio.FIRST_COMPLETED)

    @contextlib.asynccontextmanager
    async def _sending(self) -> AsyncIterator[_Sender]:
        """Threads and a client for one step. On the way out (the step failed or was cancelled) the
        deliveries still in flight are cancelled: unrecorded, they are sent again (at least once)."""
        threads = ThreadPoolExecutor(self.config.concurrency, thread_name_prefix="webhook")
        self._sender = _Sender(threads, self.config.policy)
        try:
            yield self._sender
        finally:
            tasks = [t for _, t in self._flight.values()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self._flight.clear()
            self._hosts.clear()
            sender, self._sender = self._sender, None
            threads.shutdown(wait=False, cancel_futures=True)
            if not tasks:  # a thread still sending keeps using the client until its time is up
                sender.close()

    async def _deliver(self, d: Due) -> int:
        assert self._sender is not None
        sender = self._sender
        hdrs = signing.headers(
            self.key, signing.message_id(d.event_id, d.subscription), int(time.time()), d.payload
        )
        started = time.perf_counter()
        status: int | None = None
        error: str | None = None
        try:
            headers = {**hdrs, "content-type": "application/json"}
            post = functools.partial(
                post_bytes, sender.client, d.url, d.payload, self.config.policy, headers=headers
            )
            status = await asyncio.get_running_loop().run_in_executor(sender.threads, post)
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
        (one sender keeps per-agent order), dispatch rounds while work is due, starting deliveries as
        others finish (a slow one holds back nothing but its own queue), and wait for those in flight
        before the lock goes; return how many deliveries were attempted. After ``max_rounds`` rounds that
        started deliveries it starts no more (the next step will). The lock is its session's:
        before each round after the first the session is confirmed, so a dispatcher whose lock
        connection was lost (another may be sending now) stops instead of sending beside the other."""
        done = 0
        async with self.store.pool.acquire() as conn, self.store.dispatch_lock(conn) as locked:
            if not locked:
                return 0
            async with self._sending():
                rounds = 0  # that started something: then the step stops starting, and waits for them
                while rounds < max_rounds:
                    if rounds or self._flight:
                        await self.store.confirm(conn)
                    sent = await self.dispatch_once()
                    done += sent
                    rounds += sent > 0
                    if not sent and not self._flight:
                        break
                    if not sent or len(self._flight) >= self.config.concurrency:
                        await self._landed()
                await self._drain()
        return done

    def periodic(self) -> Periodic:
        return Periodic("webhook dispatch", self.step, self.config.interval)


def after_step(models: Mapping[str, Weights]) -> AfterStep:
    """The projector hook that records the webhook events of each projection step (same transaction);
    grades are those of the served ``models``."""

    def grade_of(model: str, total: int) -> str | None:
        w = models.get(model)
        return None if w is None else w.grade(total)

    kept = KeptSubscriptions()  # the active subscriptions, from one step to the next

    async def hook(conn: Conn, start: int, end: int) -> int:
        return await derive(conn, start, end, grade_of, kept)

    return hook
