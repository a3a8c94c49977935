"""Coalesced lookups: callers that arrive while a lookup is in flight share the next one.

Single-entry appends each need the registrations of their signers and whether their statement is
already in the log. Asked one request at a time, that is two database round trips per entry; with many
requests in flight most of the database's work per entry is these tiny queries. A :class:`Coalescer`
runs the first caller's lookup at once and lets everyone who arrives meanwhile wait for one lookup of
the union of their keys, started after each of them asked (so no answer is older than its question).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Collection, Hashable, Mapping
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

#: Keys one coalesced lookup asks for at most (later callers wait for the next lookup).
MAX_KEYS = 10_000


class Coalescer(Generic[K, V]):
    """``await get(keys)`` answers ``fetch(keys)`` restricted to ``keys``, sharing one ``fetch`` of the
    union among the callers that arrive while the previous one runs."""

    def __init__(
        self, fetch: Callable[[list[K]], Awaitable[Mapping[K, V]]], max_keys: int = MAX_KEYS
    ) -> None:
        self._fetch = fetch
        self._max_keys = max_keys
        self._waiting: list[tuple[Collection[K], asyncio.Future[dict[K, V]]]] = []
        self._runner: asyncio.Task[None] | None = None

    async def get(self, keys: Collection[K]) -> dict[K, V]:
        if not keys:
            return {}
        done: asyncio.Future[dict[K, V]] = asyncio.get_running_loop().create_future()
        self._waiting.append((keys, done))
        if self._runner is None or self._runner.done():
            self._runner = asyncio.create_task(self._run())
        return await done

    async def _run(self) -> None:
        while self._waiting:
            take, union = 0, set[K]()
            while take < len(self._waiting):
                keys = self._waiting[take][0]
                if take and len(union) + len(keys) > self._max_keys:
                    break
                union.update(keys)
                take += 1
            group, self._waiting = self._waiting[:take], self._waiting[take:]
            try:
                try:
                    found = await self._fetch(list(union))
                except Exception as exc:
                    if len(group) == 1:
                        _fail(group[0][1], exc)
                        continue
                    # One caller's keys may be what failed the shared lookup (a key the database
                    # refuses): each caller is asked again alone, so a failure reaches only the callers
                    # whose own keys cause it and never an honest request that happened to share a tick.
                    # All at once: when the database itself is down, one after another would make the
                    # last caller wait for every other's failure (found by review).
                    await asyncio.gather(*(self._alone(keys, done) for keys, done in group))
                    continue
            except BaseException:  # cancelled: nobody may wait forever
                for _, done in group + self._waiting:
                    done.cancel()
                self._waiting = []
                raise
            for keys, done in group:
                if not done.done():
                    done.set_result({k: found[k] for k in keys if k in found})

    async def _alone(self, keys: Collection[K], done: asyncio.Future[dict[K, V]]) -> None:
        try:
            found = await self._fetch(list(keys))
        except Exception as exc:
            _fail(done, exc)
        else:
            if not done.done():
                done.set_result({k: found[k] for k in keys if k in found})


def _fail(done: asyncio.Future[dict[K, V]], exc: Exception) -> None:
    if not done.done():
        done.set_exception(exc)
