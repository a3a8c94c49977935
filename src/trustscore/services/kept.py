"""Bodies kept with the stamp they were made at, served again while the stamp holds (the encoded rating
responses, the rendered profile pages).

A stamp is (the rating object, the projected log size, the checkpoint size). Any log movement makes a new
body on the next read. When only the time moved (the periodic decay refresh gave the agent a new rating
object, and the log brought no entry since), the kept body is still served, for at most
:data:`MAX_STALE` seconds, while a background task makes it again: a refresh moves every agent's stamp
at once and would otherwise make every reader wait (each body needs database reads). Every body names the
time and log size it was computed at, so a kept one is visibly a few seconds behind, never wrong.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

#: Seconds a body whose rating moved with the time alone is still served while it is made again (half
#: the default decay refresh interval: a body is at most one refresh behind).
MAX_STALE = 30.0
#: Bodies made again in the background at once (each waits on a few database reads).
RENEW_SLOTS = 2

#: What a body depends on: the rating object, the projected log size, the checkpoint size.
Stamp = tuple[object, int, int | None]
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


@dataclass
class _Kept(Generic[V]):
    stamp: Stamp
    body: V
    stale_since: float | None = None  # when a reader first found the stamp moved


class KeptBodies(Generic[K, V]):
    """Bodies by key, at most ``limit`` (the oldest dropped first)."""

    def __init__(self, limit: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.limit = limit
        self._kept: dict[K, _Kept[V]] = {}
        self._renewing: set[K] = set()  # bodies being made again in the background
        self._tasks: set[asyncio.Task[None]] = set()  # those tasks (held, so none is collected early)
        self._slots = asyncio.Semaphore(RENEW_SLOTS)
        self._clock = clock

    async def get(self, key: K, stamp: Stamp, make: Callable[[], Awaitable[V]]) -> V:
        """The body ``key`` as made at ``stamp``: the kept one while its stamp is current (or moved with
        the time alone, for at most :data:`MAX_STALE` seconds, while it is made again in the
        background), else made by ``make`` now (and kept)."""
        kept = self._kept.get(key)
        if kept is not None and kept.stamp[1:] == stamp[1:]:
            if kept.stamp[0] is stamp[0]:
                return kept.body
            now = self._clock()
            if kept.stale_since is None:
                kept.stale_since = now
            if now - kept.stale_since < MAX_STALE:
                if key not in self._renewing:
                    self._renewing.add(key)
                    task = asyncio.create_task(self._renew(key, stamp, make))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
                return kept.body
        body = await make()
        self._keep(key, stamp, body)
        return body

    async def settled(self) -> None:
        """Wait for every background task started so far (tests; a clean shutdown)."""
        while self._tasks:
            await asyncio.gather(*self._tasks)

    async def _renew(self, key: K, stamp: Stamp, make: Callable[[], Awaitable[V]]) -> None:
        try:
            async with self._slots:
                body = await make()
                kept = self._kept.get(key)
                if kept is None or kept.stamp[1:] == stamp[1:]:  # not over a body a reader made since
                    self._keep(key, stamp, body)
        except Exception as exc:  # the kept body stays until MAX_STALE; then a reader makes it inline
            log.warning("making a kept body again failed (%s: %s)", type(exc).__name__, exc)
        finally:
            self._renewing.discard(key)

    def _keep(self, key: K, stamp: Stamp, body: V) -> None:
        if len(self._kept) >= self.limit and key not in self._kept:
            del self._kept[next(iter(self._kept))]
        self._kept[key] = _Kept(stamp, body)


class Budgeted(Generic[K, V]):
    """Values by key, the least recently read dropped first once there are more than ``count`` of them
    or their weights (``weigh`` of each, taken again by :meth:`touched` when a value grows in place)
    add up to more than ``weight``; the one read or kept last always stays, whatever its weight."""

    def __init__(self, count: int, weight: int, weigh: Callable[[V], int]) -> None:
        self.count = count
        self.weight_limit = weight
        self._weigh = weigh
        self._values: dict[K, tuple[V, int]] = {}  # in order of reading, the least recent first
        self.weight = 0  # of every value kept, as last weighed

    def __contains__(self, key: object) -> bool:
        return key in self._values

    def __iter__(self) -> Iterator[K]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def peek(self, key: K) -> V | None:
        """The value of ``key``, if kept, left where it is in the order of reading."""
        held = self._values.get(key)
        return None if held is None else held[0]

    def get(self, key: K) -> V | None:
        """The value of ``key``, if kept, now the most recently read."""
        held = self._values.pop(key, None)
        if held is None:
            return None
        self._values[key] = held
        return held[0]

    def put(self, key: K, value: V) -> None:
        """Keep ``value`` for ``key`` (in place of any other), the most recently read."""
        self.pop(key)
        weight = self._weigh(value)
        self._values[key] = (value, weight)
        self.weight += weight
        self._drop()

    def touched(self, key: K) -> None:
        """The value of ``key`` changed in place: weighed again, the budget kept."""
        held = self._values.get(key)
        if held is not None:
            weight = self._weigh(held[0])
            self._values[key] = (held[0], weight)
            self.weight += weight - held[1]
            self._drop()

    def pop(self, key: K) -> V | None:
        held = self._values.pop(key, None)
        if held is None:
            return None
        self.weight -= held[1]
        return held[0]

    def drop_oldest_while(self, stale: Callable[[V], bool]) -> None:
        """Drop values from the least recently read on, while ``stale`` holds for each."""
        while self._values:
            key, (value, weight) = next(iter(self._values.items()))
            if not stale(value):
                return
            del self._values[key]
            self.weight -= weight

    def _drop(self) -> None:
        while len(self._values) > 1 and (len(self._values) > self.count or self.weight > self.weight_limit):
            self.weight -= self._values.pop(next(iter(self._values)))[1]
