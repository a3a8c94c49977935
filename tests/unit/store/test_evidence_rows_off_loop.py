"""Many evidence rows (a process loading the whole log) are converted in a worker thread, to the same
rows the event loop would have made."""

from __future__ import annotations

import datetime as dt
import threading
from typing import Any, cast

import asyncpg
import pytest

from trustscore.store import projection_tables
from trustscore.store.projection_tables import ProjectionStore

AT = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)


class Rows:
    """A pool whose every fetch answers the same evidence records (mappings, as asyncpg's are)."""

    def __init__(self, n: int) -> None:
        self.records = [
            {
                "idx": i // 3, "seq": i % 3, "agent": f"ts1_{i % 7:040x}", "dimension": "capability",
                "source": "real", "value": 0.5 if i % 2 else None, "result": None if i % 2 else 1,
                "key": f"capability@1/q{i}", "at": AT, "issuer": None, "extra_weight": 1.0,
            }
            for i in range(n)
        ]  # fmt: skip

    async def fetch(self, query: str, *args: Any) -> list[dict[str, Any]]:
        return self.records


async def test_many_rows_are_converted_off_the_loop_to_the_same_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    store = ProjectionStore(cast(asyncpg.Pool, Rows(50)))
    on_loop = await store.evidence_since(0, 100)
    threads: list[threading.Thread] = []
    convert = projection_tables._evidence_row

    def recording(r: Any) -> Any:
        threads.append(threading.current_thread())
        return convert(r)

    monkeypatch.setattr(projection_tables, "ROWS_OFF_LOOP", 50)
    monkeypatch.setattr(projection_tables, "_evidence_row", recording)
    assert await store.evidence_since(0, 100) == on_loop
    assert len(threads) == 50 and threading.main_thread() not in threads
