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
from collections.abc import Awaitable, Callable, Hashable
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
