"""The per-key token bucket."""

from __future__ import annotations

import pytest

from trustscore.errors import InvalidInput, RateLimited
from trustscore.services.ratelimit import KeyRateLimiter


def test_bucket_refills_and_keys_are_independent() -> None:
    now = [0.0]
    limiter = KeyRateLimiter(rate=2.0, burst=3, clock=lambda: now[0])
    limiter.take("a", 3)
    with pytest.raises(RateLimited, match="signer a"):
        limiter.take("a")
    limiter.take("b", 3)
    now[0] = 1.0  # two tokens back
    limiter.take("a", 2)
    with pytest.raises(RateLimited) as refused:
        limiter.take("a", 3)
    assert refused.value.extra["retry_after"] == 2  # three tokens at 2/s: 1.5 s, rounded up


def test_a_request_larger_than_the_burst_is_invalid_not_throttled() -> None:
    limiter = KeyRateLimiter(rate=2.0, burst=3)
    with pytest.raises(InvalidInput, match="exceed its burst of 3"):
        limiter.take("a", 4)  # could never pass: retrying would not help


def test_memory_is_bounded_and_each_take_is_cheap() -> None:
    limiter = KeyRateLimiter(rate=1.0, burst=5, max_keys=1000)
    for i in range(50_000):  # a flood of fresh keys (regression: every take once rebuilt the whole map)
        limiter.take(f"k{i}")
    assert len(limiter._buckets) == 1000


def test_tokens_given_back_never_overfill_a_bucket() -> None:
    now = [0.0]
    limiter = KeyRateLimiter(rate=1.0, burst=3, clock=lambda: now[0])
    limiter.take("a", 3)
    limiter.give("a", 2)
    limiter.take("a", 2)  # the two given back
    with pytest.raises(RateLimited):
        limiter.take("a")
    limiter.give("a", 10)
    limiter.take("a", 3)
    with pytest.raises(RateLimited):
        limiter.take("a")  # given back up to the burst, not beyond
    limiter.give("never-seen", 5)  # a bucket not kept is full already: nothing to give
    assert "never-seen" not in limiter._buckets
