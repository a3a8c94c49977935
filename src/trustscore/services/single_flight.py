"""One making per key, shared by every caller that asks while it runs (Go's "singleflight").

A board made in a thread, a page rendered, a tally of the log, a name order, an attestation bundle: each
is costly, and readers arriving together must not each start one. :class:`SingleFlight` runs the first
caller's making as a task and lets callers arriving meanwhile wait for that task. The task is shielded: a
caller that goes away (a closed connection cancels its request) leaves it running for the others; its
error is retrieved even when every caller left (no "exception was never retrieved" in the log). It is
forgotten when it has ended (a caller in between gets what it made), so the next caller starts a new one.

A making may carry a stamp (what it is made for: a log size, a revision). A caller with another stamp
does not join it: it starts its own, and the older one runs on unshared.

Not to be confused with :class:`~trustscore.services.coalesce.Coalescer`, which batches lookups of many
keys into one query.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class SingleFlight(Generic[K, V]):
    """The makings under way, one per key."""

    def __init__(self) -> None:
        self._under_way: dict[K, tuple[object, asyncio.Future[V]]] = {}

    def under_way(self, key: K, stamp: object = None) -> bool:
        """Whether a making of ``key`` for ``stamp`` runs (one that a caller would join)."""
        held = self._under_way.get(key)
        return held is not None and held[0] == stamp

    def start(self, key: K, make: Callable[[], Awaitable[V]], stamp: object = None) -> asyncio.Future[V]:
        """The making of ``key`` for ``stamp`` under way, else ``make()`` started now as a task (called in
        this step of the event loop: what it takes as arguments is taken now). Wait for it with
        ``asyncio.wait`` or :meth:`get` (never a bare ``await``, which a caller's cancellation would pass on
        to it)."""
        held = self._under_way.get(key)
        if held is None or held[0] != stamp:
            task = asyncio.ensure_future(make())
            task.add_done_callback(lambda done: self._ended(key, done))
            held = self._under_way[key] = (stamp, task)
        return held[1]

    async def get(self, key: K, make: Callable[[], Awaitable[V]], stamp: object = None) -> V:
        """The result of :meth:`start`'s task (its error raised); a caller cancelled stops only itself."""
        return await asyncio.shield(self.start(key, make, stamp))

    def _ended(self, key: K, done: asyncio.Future[V]) -> None:
        held = self._under_way.get(key)
        if held is not None and held[1] is done:  # not one for another stamp that took its place
            del self._under_way[key]
        if not done.cancelled():
            done.exception()  # retrieved: a making every caller left does not log "never retrieved"
