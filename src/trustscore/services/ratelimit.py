"""Rate limits on writes: a token bucket per signer id (or per client address), in bounded memory."""

from __future__ import annotations

import math
import time
from collections import OrderedDict
from collections.abc import Callable

from trustscore.errors import InvalidInput, RateLimited


class KeyRateLimiter:
    """At most ``burst`` writes at once per key, refilled at ``rate`` per second.

    Buckets live in an LRU of at most ``max_keys``: a forgotten key starts again with a full bucket, so
    the bound trades a little leniency towards keys idle long enough to be evicted for O(1) work per take.
    """

    def __init__(
        self,
        rate: float,
        burst: int,
        *,
        max_keys: int = 100_000,
        clock: Callable[[], float] = time.monotonic,
        what: str = "signer",
    ) -> None:
        self.what = what  # what a key is, for messages: a signer key id, a client address
        self.rate = rate
        self.burst = burst
        self.max_keys = max_keys
        self.clock = clock
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()

    def check(self, key_id: str) -> None:
        """Raise :class:`RateLimited` if ``key_id`` has not one token left; spend nothing."""
        if self.rate <= 0:
            return
        tokens, last = self._buckets.get(key_id, (float(self.burst), self.clock()))
        tokens = min(float(self.burst), tokens + (self.clock() - last) * self.rate)
        if tokens < 1:
            raise RateLimited(
                f"{self.what} {key_id} is over its rate limit ({self.rate:g}/s, burst {self.burst})",
                retry_after=max(1, math.ceil((1 - tokens) / self.rate)),
            )

    def spend(self, key_id: str, n: int = 1) -> None:
        """:meth:`take` what is left of ``n`` without ever refusing (work already done for nothing)."""
        try:
            self.take(key_id, n)
        except RateLimited:
            self._buckets[key_id] = (0.0, self.clock())
            self._buckets.move_to_end(key_id)

    def give(self, key_id: str, n: int = 1) -> None:
        """Return ``n`` tokens taken from ``key_id``'s bucket for work that cost nothing after all (never
        beyond a full bucket; a bucket forgotten meanwhile is full already)."""
        if self.rate <= 0 or key_id not in self._buckets:
            return
        tokens, last = self._buckets[key_id]
        self._buckets[key_id] = (min(float(self.burst), tokens + n), last)

    def take(self, key_id: str, n: int = 1) -> None:
        """Spend ``n`` tokens of ``key_id``'s bucket or raise :class:`RateLimited`."""
        if self.rate <= 0:
            return
        now = self.clock()
        tokens, last = self._buckets.get(key_id, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - last) * self.rate)
        if n > self.burst:
            raise InvalidInput(
                f"{n} statements from {self.what} {key_id} in one request exceed its burst of {self.burst}; "
                "send them in smaller batches"
            )
        if tokens < n:
            raise RateLimited(
                f"{self.what} {key_id} is over its rate limit ({self.rate:g}/s, burst {self.burst})",
                retry_after=max(1, math.ceil((n - tokens) / self.rate)),
            )
        self._buckets[key_id] = (tokens - n, now)
        self._buckets.move_to_end(key_id)
        while len(self._buckets) > self.max_keys:
            self._buckets.popitem(last=False)
