"""Who gets graded when: a queue fair across signers, with bounded waits and a sandbox budget per report.

Grading runs submitted code, so it is the server's scarcest resource. At most ``slots`` reports are
graded at once, at most one per signer and at most half the slots' worth per client address (more
reports of a signer, or from an address, in grading or waiting are refused with 429: keys are free, so
the signer rule alone let one client with many keys hold every slot; half leaves the other half to
everyone else while one honest client may still submit a few at once), waiting signers are served first
come first served, the wait is bounded (503
after ``max_wait`` seconds, or at once when ``max_waiting`` reports already wait), and every refusal
carries a ``Retry-After`` and says why. Each graded report gets a sandbox budget (see
:func:`trustscore.grading.sandbox.budget`): once its runs have spent it, its remaining code items fail
without running, so sleeping or spinning answers cannot hold a slot for long. See docs/graders.md.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections import Counter, deque
from collections.abc import AsyncIterator
from dataclasses import dataclass

from trustscore.errors import Busy, RateLimited


@dataclass(frozen=True)
class QueueLimits:
    slots: int = 4  # reports graded at once
    max_waiting: int = 32  # reports waiting for a slot; more are refused at once
    max_wait: float = 30.0  # seconds a report may wait for a slot
    report_budget_s: float = 30.0  # sandbox seconds one report may spend (timeouts charge their wall limit)


class GradingQueue:
    def __init__(self, limits: QueueLimits | None = None) -> None:
        self.limits = limits or QueueLimits()
        self._free = self.limits.slots
        self._signers: set[str] = set()  # in grading or waiting
        self._addresses: Counter[str] = Counter()  # client addresses of those reports
        self.per_address = max(1, self.limits.slots // 2)
        self._waiting: deque[asyncio.Future[None]] = deque()
        self._typical_s = 2.0  # moving average of a report's grading time, for Retry-After

    @property
    def waiting(self) -> int:
        return len(self._waiting)

    def _retry_after(self, ahead: int) -> int:
        return max(1, math.ceil(self._typical_s * (1 + ahead / max(1, self.limits.slots))))

    @contextlib.asynccontextmanager
    async def slot(self, signer: str, address: str | None = None) -> AsyncIterator[None]:
        """Hold one grading slot for ``signer`` submitting from ``address`` (None: not charged to an
        address, e.g. in-process callers); raises RateLimited or Busy instead of waiting long."""
        if address is not None and self._addresses[address] >= self.per_address:
            raise RateLimited(
                f"{self.per_address} report(s) from {address} are already being graded or waiting; the server "
                f"grades at most {self.per_address} report(s) per client address at a time",
                retry_after=self._retry_after(0),
            )
        if signer in self._signers:
            raise RateLimited(
                f"a report of {signer} is already being graded or waiting; the server grades one report per "
                "signer at a time",
                retry_after=self._retry_after(0),
            )
        if self._free == 0 and len(self._waiting) >= self.limits.max_waiting:
            raise Busy(
                f"{len(self._waiting)} reports are already waiting to be graded; retry later",
                retry_after=self._retry_after(len(self._waiting)),
            )
        self._signers.add(signer)
        if address is not None:
            self._addresses[address] += 1
        try:
            await self._acquire()
            started = asyncio.get_running_loop().time()
            try:
                yield
            finally:
                self._release()
                took = asyncio.get_running_loop().time() - started
                self._typical_s = 0.8 * self._typical_s + 0.2 * took
        finally:
            self._signers.discard(signer)
            if address is not None:
                self._addresses[address] -= 1
                if not self._addresses[address]:
                    del self._addresses[address]

    async def _acquire(self) -> None:
        if self._free > 0 and not self._waiting:
            self._free -= 1
            return
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append(turn)
        try:
            await asyncio.wait({turn}, timeout=self.limits.max_wait)
        except BaseException:  # cancelled while waiting: give back a slot handed over meanwhile
            if turn.done():
                self._release()
            else:
                self._waiting.remove(turn)
                turn.cancel()
            raise
        if not turn.done():
            self._waiting.remove(turn)
            turn.cancel()
            raise Busy(
                f"waited {self.limits.max_wait:g} s for a grading slot: all {self.limits.slots} are busy "
                f"and {len(self._waiting)} reports wait; retry later",
                retry_after=self._retry_after(len(self._waiting)),
            )

    def _release(self) -> None:
        """Hand the slot to the longest-waiting report, or free it."""
        while self._waiting:
            turn = self._waiting.popleft()
            if not turn.done():
                turn.set_result(None)
                return
        self._free += 1
