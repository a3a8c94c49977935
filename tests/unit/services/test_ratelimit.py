"""The per-key token bucket."""

from __future__ import annotations

import pytest

from trustscore.errors import RateLimited
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
    with pytest.raises(RateLimited):
        limiter.take("a")


def test_memory_is_bounded_and_each_take_is_cheap() -> None:
    limiter = KeyRateLimiter(rate=1.0, burst=5, max_keys=1000)
    for i in range(50_000):  # a flood of fresh keys (regression: every take once rebuilt the whole map)
        limiter.take(f"k{i}")
    assert len(limiter._buckets) == 1000
