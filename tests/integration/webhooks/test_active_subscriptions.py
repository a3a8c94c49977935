"""Audit HIGH 1: every projection step re-read and re-parsed the leaf of every active subscription
(``store/webhooks.py`` ``_active``), on the event loop, whenever the step met an entry that may cause an
event: 1,000 subscriptions of ~66 KB each made /healthz's p95 go from 100 ms to 1.2 s, and logging
subscriptions cost quadratic time. Now the projector keeps the matching data of the active subscriptions
in memory between steps (rebuilt from the table's columns when another process projected meanwhile or a
step rolled back), and no step parses a subscription it did not just meet."""

from __future__ import annotations

from typing import Any

import asyncpg
import msgspec
import pytest

from tests.integration.webhooks.test_card_events_in_one_range import card
from trustscore.kinds.subscriptions import EventType, Subscription, make_revocation, make_subscription
from trustscore.ledger import audit, dsse, keys
from trustscore.ledger.submission import CheckedEntry, check, prepare
from trustscore.services.webhooks import after_step
from trustscore.store.log import LogStore
from trustscore.store.projection_tables import AfterStep


def signed(payload: bytes, key: keys.SigningKey) -> CheckedEntry:
    known = {key.id: bytes(key.public_key)}
    return check(prepare(msgspec.to_builtins(dsse.sign(payload, [key]))), known.get)


def subscribed(
    key: keys.SigningKey, i: int, events: list[EventType], agents: list[str] | None = None
) -> CheckedEntry:
    url = f"https://hooks{i}.example/" + "a" * 1000
    return signed(make_subscription(subscriber=key.id, url=url, events=events, agents=agents), key)


@pytest.fixture
def subscription_parses(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many subscription leaves were parsed (one item per parse)."""
    seen: list[int] = []
    parse = audit.parse_leaf

    def counting(leaf: bytes, *args: Any, **kwargs: Any) -> Any:
        out = parse(leaf, *args, **kwargs)
        if isinstance(out.statement.predicate, Subscription):
            seen.append(1)
        return out

    monkeypatch.setattr(audit, "parse_leaf", counting)
    return seen


async def project(pool: asyncpg.Pool, hook: AfterStep, start: int, end: int) -> None:
    async with pool.acquire() as conn, conn.transaction():
        await hook(conn, start, end)


async def rolled_back(pool: asyncpg.Pool, hook: AfterStep, start: int, end: int) -> None:
    async with pool.acquire() as conn, conn.transaction():
        await hook(conn, start, end)
        raise RuntimeError("rolled back")


async def targets(pool: asyncpg.Pool, index: int) -> list[int]:
    """The subscriptions the events of the entry at ``index`` were fanned out to."""
    rows = await pool.fetch(
        "SELECT DISTINCT d.subscription FROM webhook_deliveries d JOIN webhook_events e ON e.seq = d.event_seq "
        "WHERE e.idx = $1 ORDER BY d.subscription",
        index,
    )
    return [r["subscription"] for r in rows]


async def append(store: LogStore, entries: list[CheckedEntry]) -> list[int]:
    return [a.index for a in await store.append(entries)]


async def test_a_step_does_not_reparse_every_active_subscription(
    pool: asyncpg.Pool, subscription_parses: list[int]
) -> None:
    store = LogStore(pool)
    subscriber, a, b = (keys.SigningKey.generate() for _ in range(3))
    hook = after_step({})
    first = await append(store, [card(a, "m1", "1"), card(b, "m1", "2")])
    for_a = await append(store, [subscribed(subscriber, i, ["card.changed"], [a.id]) for i in range(10)])
    for_all = await append(store, [subscribed(subscriber, 10 + i, ["card.changed"]) for i in range(5)])
    await append(store, [subscribed(subscriber, 20 + i, ["card.changed"], [b.id]) for i in range(5)])
    await append(store, [subscribed(subscriber, 30 + i, ["event.negative"]) for i in range(5)])
    revocation = make_revocation(subscriber=subscriber.id, subscription=for_a[0])
    await append(store, [signed(revocation, subscriber)])
    [changed] = await append(store, [card(a, "m2", "3")])
    await project(pool, hook, first[0], changed + 1)
    assert await targets(pool, changed) == for_a[1:] + for_all
    parsed = len(subscription_parses)
    assert parsed <= 30  # each subscription met in the range, once

    for step in range(5):  # later steps, each with an entry that causes an event
        [again] = await append(store, [card(a, f"m{3 + step}", str(4 + step))])
        await project(pool, hook, again, again + 1)
        assert await targets(pool, again) == for_a[1:] + for_all
    assert len(subscription_parses) == parsed  # before: all 25 active ones, every step


async def test_another_process_or_a_rolled_back_step_is_followed(
    pool: asyncpg.Pool, subscription_parses: list[int]
) -> None:
    """The kept subscriptions are those as of the step's start: a step another process projected (the
    lease moved) or one that rolled back is not missed nor half applied."""
    store = LogStore(pool)
    subscriber, a = keys.SigningKey.generate(), keys.SigningKey.generate()
    mine, theirs = after_step({}), after_step({})
    [first] = await append(store, [card(a, "m1", "1")])
    [s1] = await append(store, [subscribed(subscriber, 1, ["card.changed"])])
    await project(pool, mine, first, s1 + 1)
    [s2] = await append(store, [subscribed(subscriber, 2, ["card.changed"])])
    await project(pool, theirs, s2, s2 + 1)  # another process projects this step
    [c1] = await append(store, [card(a, "m2", "2")])
    await project(pool, mine, c1, c1 + 1)
    assert await targets(pool, c1) == [s1, s2]

    [gone, s3] = await append(
        store,
        [
            signed(make_revocation(subscriber=subscriber.id, subscription=s1), subscriber),
            subscribed(subscriber, 3, ["card.changed"]),
        ],
    )
    with pytest.raises(RuntimeError):  # the step's transaction rolls back after the hook ran
        await rolled_back(pool, mine, gone, s3 + 1)
    [c2] = await append(store, [card(a, "m3", "3")])
    await project(pool, mine, gone, c2 + 1)  # the same entries again, then a card change
    assert await targets(pool, c2) == [s2, s3]
    assert await pool.fetchval("SELECT revoked_at FROM webhook_subscriptions WHERE id = $1", s1) == gone
