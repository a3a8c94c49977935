"""Per-key rate limits on writes: a token bucket per signer id, in memory."""

from __future__ import annotations

import time
from collections.abc import Callable

from trustscore.errors import RateLimited


class KeyRateLimiter:
    """At most ``burst`` writes at once per key, refilled at ``rate`` per second."""

    def __init__(self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.rate = rate
        self.burst = burst
        self.clock = clock
        self._buckets: dict[str, tuple[float, float]] = {}

    def take(self, key_id: str, n: int = 1) -> None:
        """Spend ``n`` tokens of ``key_id``'s bucket or raise :class:`RateLimited`."""
        if self.rate <= 0:
            return
        now = self.clock()
        tokens, last = self._buckets.get(key_id, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - last) * self.rate)
        if tokens < n:
            raise RateLimited(f"signer {key_id} is over its rate limit ({self.rate:g}/s, burst {self.burst})")
        self._buckets[key_id] = (tokens - n, now)
        if len(self._buckets) > 100_000:  # forget idle keys rather than grow without bound
            cutoff = now - self.burst / self.rate
            self._buckets = {k: v for k, v in self._buckets.items() if v[1] >= cutoff}
