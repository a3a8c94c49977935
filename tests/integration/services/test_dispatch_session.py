"""The webhook dispatcher serialises its rounds with a session advisory lock of its own. When that session
is lost (a network partition, ``pg_terminate_backend``), PostgreSQL releases the lock and another
dispatcher may start sending while the first still runs its step. Before, the first went on with round
after round until nothing was due, and an attempt that both recorded failed the later recorder's whole
round with a unique violation. Now each round after the first confirms the session, and an attempt
recorded already is left as it was."""

from __future__ import annotations

import asyncpg
import pytest

from tests.integration.store.test_scope_marks import log_card
from trustscore.errors import StorageError
from trustscore.ledger import keys
from trustscore.outbound.guard import OutboundPolicy
from trustscore.services.webhooks import WebhookConfig, WebhookService
from trustscore.store.webhooks import Due, WebhookStore


async def delivery(pool: asyncpg.Pool) -> Due:
    """One pending delivery of one event to one subscription (rows as the projector writes them)."""
    index = await log_card(pool, keys.SigningKey.generate(), "m1")
    await pool.execute(
        "INSERT INTO webhook_subscriptions (id, subscriber, url, events, agents, threshold) "
        "VALUES ($1, 'ts1_sub', 'https://receiver.example/hook', '{}', '{}', 0)",
        index,
    )
    seq = await pool.fetchval(
        "INSERT INTO webhook_events (id, idx, type, agent, at, payload) "
        "VALUES ('evt_1', $1, 'card.updated', 'ts1_a', now(), '{}') RETURNING seq",
        index,
    )
    await pool.execute(
        "INSERT INTO webhook_deliveries (subscription, event_seq, agent) VALUES ($1, $2, 'ts1_a')", index, seq
    )
    return Due(index, seq, 0, "https://receiver.example/hook", "evt_1", b"{}")


async def test_an_attempt_recorded_by_another_dispatcher_is_left_as_it_was(pool: asyncpg.Pool) -> None:
    store = WebhookStore(pool)
    due = await delivery(pool)
    assert await store.record(due, 204, None, 12, "delivered", 0.0)
    assert not await store.record(due, None, "timed out", 5000, "pending", 60.0)  # the other's, later
    row = await pool.fetchrow("SELECT state, attempts FROM webhook_deliveries")
    assert row is not None and (row["state"], row["attempts"]) == ("delivered", 1)
    assert await pool.fetchval("SELECT count(*) FROM webhook_attempts") == 1


async def test_a_delivery_whose_count_does_not_match_its_attempts_fails_loudly(pool: asyncpg.Pool) -> None:
    """(Found by review.) A count out of step with the logged attempts (a manual reset, a partial restore)
    is an error, not "recorded by another dispatcher": skipped quietly, the delivery would be sent again
    every round."""
    store = WebhookStore(pool)
    due = await delivery(pool)
    assert await store.record(due, None, "timed out", 5000, "pending", 0.0)
    await pool.execute("UPDATE webhook_deliveries SET attempts = 0")  # out of step: attempt 1 is logged
    with pytest.raises(asyncpg.UniqueViolationError):
        await store.record(due, 204, None, 12, "delivered", 0.0)
    await pool.execute("UPDATE webhook_deliveries SET attempts = 5")  # ahead: attempt 1 was not the last
    ahead = Due(due.subscription, due.event_seq, 1, due.url, due.event_id, due.payload)
    with pytest.raises(StorageError, match="attempt count is not 1"):
        await store.record(ahead, 204, None, 12, "delivered", 0.0)
    assert await pool.fetchval("SELECT count(*) FROM webhook_attempts") == 1  # nothing half-written


async def test_a_dispatcher_whose_lock_session_is_lost_stops_after_the_round_in_hand(
    pool: asyncpg.Pool, dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    service = WebhookService(
        None,  # type: ignore[arg-type]  # no log: the rounds below stand for the dispatch
        WebhookStore(pool),
        keys.SigningKey.generate(),
        WebhookConfig(OutboundPolicy()),
    )
    rounds: list[int] = []

    async def dispatch_once() -> int:
        rounds.append(len(rounds))
        if len(rounds) == 1:  # the lock's session is ended while the first round sends
            admin = await asyncpg.connect(dsn)  # the pool's connections take the application role
            try:
                assert await admin.fetchval(
                    "SELECT pg_terminate_backend(pid) FROM pg_locks WHERE locktype = 'advisory' "
                    "AND objsubid = 1 AND granted"
                )
            finally:
                await admin.close()
        return 1  # something was sent: before, the next round followed at once, and so on

    monkeypatch.setattr(service, "dispatch_once", dispatch_once)
    with pytest.raises((asyncpg.PostgresConnectionError, asyncpg.InterfaceError)):
        await service.step(max_rounds=5)
    assert rounds == [0]
