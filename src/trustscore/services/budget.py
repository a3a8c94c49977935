"""A budget of work in flight: callers hold a weight of it, first come first served, for a bounded wait.

Used where one request's cost grows with what it reads (an attestation bundle's entries): the requests in
flight together hold at most ``limit``, a request heavier than the whole budget holds all of it, and a
request that cannot start within ``max_wait`` seconds is refused with 503 and a ``Retry-After``.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections import deque
from collections.abc import AsyncIterator

from trustscore.errors import Busy


class WorkBudget:
    def __init__(self, limit: int, max_wait: float, what: str) -> None:
        if limit < 1 or max_wait < 0:
            raise ValueError("a budget needs a limit >= 1 and a wait >= 0")
        self.limit = limit
        self.max_wait = max_wait
        self.what = what  # how the refusal names the work, e.g. "bundle entries"
        self.used = 0
        self._queue: deque[object] = deque()  # waiting callers, first come first served
        self._changed = asyncio.Condition()

    @contextlib.asynccontextmanager
    async def hold(self, weight: int) -> AsyncIterator[None]:
        """Hold ``weight`` of the budget (at most all of it) while the block runs; raises Busy when it
        could not be had within ``max_wait`` seconds."""
        weight = min(max(weight, 0), self.limit)
        ticket = object()
        async with self._changed:
            self._queue.append(ticket)
            try:
                async with asyncio.timeout(self.max_wait):
                    await self._changed.wait_for(
                        lambda: self._queue[0] is ticket and self.used + weight <= self.limit
                    )
            except TimeoutError:
                raise Busy(
                    f"{self.used} {self.what} are in work and {len(self._queue) - 1} requests wait; "
                    f"waited {self.max_wait:g} s, retry later",
                    retry_after=max(1, math.ceil(self.max_wait)),
                ) from None
            finally:
                self._queue.remove(ticket)
                self._changed.notify_all()  # the next in line may fit now
            self.used += weight
        try:
            yield
        finally:
            async with self._changed:
                self.used -= weight
                self._changed.notify_all()
