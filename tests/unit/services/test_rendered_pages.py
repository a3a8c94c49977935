"""The kept profile pages (services.pages.RenderedPages): when a kept body may be served, and for how long.

Attacks pinned: new evidence (any log movement) is never answered with the kept page; a page whose only
change is the time (the decay refresh) is served kept for at most MAX_STALE seconds and is rendered again
once, in the background, however many readers ask; a failing background render does not lose the page.
"""

from __future__ import annotations

import asyncio

import pytest

from trustscore.services.kept import MAX_STALE
from trustscore.services.pages import RenderedPages

KEY = ("ts1_agent", "", "", "http://x")


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Maker:
    """Renders ``body-N`` on its N-th call; fails while ``fail`` is set."""

    def __init__(self) -> None:
        self.calls = 0
        self.fail = False

    async def __call__(self) -> bytes:
        await asyncio.sleep(0)
        if self.fail:
            raise RuntimeError("database gone")
        self.calls += 1
        return f"body-{self.calls}".encode()


async def test_a_current_stamp_is_served_kept_and_any_log_movement_renders_at_once() -> None:
    pages, make = RenderedPages(Clock()), Maker()
    rating = object()
    assert await pages.page(KEY, (rating, 10, 10), make) == b"body-1"
    assert await pages.page(KEY, (rating, 10, 10), make) == b"body-1"
    assert await pages.page(KEY, (object(), 11, 10), make) == b"body-2"  # new evidence: projected size
    assert await pages.page(KEY, (object(), 11, 12), make) == b"body-3"  # a new checkpoint
    assert make.calls == 3


async def test_a_time_only_move_is_served_kept_while_rendered_again_once() -> None:
    clock, make = Clock(), Maker()
    pages = RenderedPages(clock)
    await pages.page(KEY, (object(), 10, 10), make)
    refreshed = (object(), 10, 10)  # the decay refresh: a new rating object, no new entry
    answers = await asyncio.gather(*(pages.page(KEY, refreshed, make) for _ in range(20)))
    assert set(answers) == {b"body-1"}
    await pages.settled()
    assert make.calls == 2  # one background render for twenty readers
    assert await pages.page(KEY, refreshed, make) == b"body-2"


async def test_a_kept_page_is_never_served_longer_than_max_stale() -> None:
    clock, make = Clock(), Maker()
    pages = RenderedPages(clock)
    await pages.page(KEY, (object(), 10, 10), make)
    make.fail = True  # the background render fails: the kept page stays, for MAX_STALE at most
    assert await pages.page(KEY, (object(), 10, 10), make) == b"body-1"
    await pages.settled()
    clock.now += MAX_STALE - 0.01
    assert await pages.page(KEY, (object(), 10, 10), make) == b"body-1"
    await pages.settled()
    clock.now += 0.02
    with pytest.raises(RuntimeError, match="database gone"):  # the reader now waits for a render
        await pages.page(KEY, (object(), 10, 10), make)
    make.fail = False
    assert await pages.page(KEY, (object(), 10, 10), make) == b"body-2"


async def test_a_background_render_never_replaces_a_newer_page() -> None:
    """New evidence arrives while a stale page renders in the background: the reader renders the new
    page inline; the background render, finishing later, must not put the older page back."""
    pages, make = RenderedPages(Clock()), Maker()
    await pages.page(KEY, (object(), 10, 10), make)  # body-1
    slow = asyncio.Event()

    async def slow_make() -> bytes:
        await slow.wait()
        return b"old render"

    assert await pages.page(KEY, (object(), 10, 10), slow_make) == b"body-1"  # renders in the background
    newer = (object(), 11, 11)
    assert await pages.page(KEY, newer, make) == b"body-2"  # new evidence: rendered inline
    slow.set()
    await pages.settled()
    assert await pages.page(KEY, newer, make) == b"body-2"
