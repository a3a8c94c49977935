"""The projector's index of active subscriptions (webhooks/matching.py) matches an event exactly as
``events.wants`` over every active subscription did (audit HIGH 1 replaced that scan), and the dispatcher's
URL host key does not let one host pass for several."""

from __future__ import annotations

import datetime as dt

from hypothesis import given
from hypothesis import strategies as st

from trustscore.kinds.subscriptions import EVENT_TYPES, Subscription
from trustscore.webhooks import events
from trustscore.webhooks.matching import Active, ActiveSubscriptions, host_key

AGENTS = ["ts1_" + c * 40 for c in "abcd"]
T = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)


def subscription(types: list[str], agents: list[str], threshold: int) -> Subscription:
    return Subscription(
        nonce="n" * 16,
        issued_at="2026-12-01T00:00:00Z",
        subscriber="ts1_" + "s" * 40,
        url="https://x.example/h",
        events=types,  # type: ignore[arg-type]
        agents=agents,
        threshold=threshold,
    )


subs = st.lists(
    st.tuples(
        st.lists(st.sampled_from(EVENT_TYPES), min_size=1, unique=True),
        st.lists(st.sampled_from(AGENTS), unique=True),
        st.integers(0, 30),
    ),
    max_size=12,
)
changes = st.lists(
    st.tuples(
        st.sampled_from(EVENT_TYPES),
        st.sampled_from(AGENTS),
        st.integers(0, 20),
        st.one_of(st.none(), st.integers(0, 60)),
    ),
    min_size=1,
    max_size=5,
)


@given(subs, st.lists(st.integers(0, 11)), changes)
def test_the_index_matches_as_wants_over_every_active_subscription(
    made: list[tuple[list[str], list[str], int]],
    revoked: list[int],
    found: list[tuple[str, str, int, int | None]],
) -> None:
    active = {i: subscription(*m) for i, m in enumerate(made)}
    index = ActiveSubscriptions(Active.of(i, s) for i, s in active.items())
    for i in revoked:
        active.pop(i, None)
        index.remove(i)
    assert len(index) == len(active)
    for type_, agent, at, old in found:
        data = {"old_total": old, "new_total": 30} if type_ == "rating.changed" else {}
        e = events.WebhookEvent("evt_x", at, type_, agent, T, data)
        expected = [i for i, s in sorted(active.items()) if i < at and events.wants(s, e)]
        assert index.matching(e) == expected


def test_a_subscription_added_again_replaces_the_one_before() -> None:
    index = ActiveSubscriptions([Active.of(1, subscription(["card.changed"], [AGENTS[0]], 0))])
    index.add(Active.of(1, subscription(["card.changed"], [AGENTS[1]], 0)))
    e = events.WebhookEvent("evt_x", 5, "card.changed", AGENTS[0], T)
    assert index.matching(e) == []
    assert index.matching(events.WebhookEvent("evt_x", 5, "card.changed", AGENTS[1], T)) == [1]


def test_one_host_is_one_key_whatever_its_port_case_or_trailing_dot() -> None:
    forms = [
        "https://hooks.example/a",
        "http://HOOKS.example:8080/b?c#d",
        "https://hooks.example.:443",
        "https://hooks.example?x=1",
    ]
    assert {host_key(u) for u in forms} == {"hooks.example"}
    assert host_key("http://[::1]:8080/x") == "[::1]"
    assert host_key("http://127.0.0.2:9/x") != host_key("http://127.0.0.1:9/x")
