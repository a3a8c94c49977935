"""The retry schedule: exponential backoff with full jitter, and the dead-letter limit (docs/webhooks.md)."""

from __future__ import annotations

import random

#: Attempts after which a delivery is dead-lettered (published in docs/webhooks.md).
MAX_ATTEMPTS = 8
BASE_S = 5.0
CAP_S = 6 * 3600.0


def backoff(
    attempt: int, *, base: float = BASE_S, cap: float = CAP_S, rng: random.Random | None = None
) -> float:
    """Seconds to wait after failed attempt number ``attempt`` (1-based): uniform in
    [d/2, d] with d = min(cap, base * 2**(attempt-1)), so retries spread out and never synchronise."""
    d = min(cap, base * 2 ** max(0, attempt - 1))
    return (rng or random).uniform(d / 2, d)
