"""Reports cannot be padded (issue #17): answer size, turns per item and total size are bounded, and
an oversized report is refused with 413 before it is graded or logged."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import msgspec
import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from tests.helpers import new_card
from trustscore.api.app import create_app
from trustscore.exams.loader import DEFAULT_PUBLIC_DIR, ExamDirs, load_exam
from trustscore.exams.reporting import build_report
from trustscore.grading import Turn
from trustscore.kinds.exam_report import MAX_ANSWER_BYTES, MAX_REPORT_BYTES, MAX_TURNS, ReportItem
from trustscore.ledger import dsse, keys
from trustscore.settings import Settings

Client = AsyncTestClient[Litestar]
AGENTS = DEFAULT_PUBLIC_DIR.parent / "examples" / "agents" / "scripted.py"
EXAM = load_exam("capability@1", ExamDirs())


def body(env: Any) -> bytes:
    return msgspec.json.encode(env)


def report(key: keys.SigningKey, answer: Any, *, turns: int = 1) -> dsse.Envelope:
    """A report answering every item with ``answer(item)`` (repeated ``turns`` times)."""
    items = [ReportItem(i.id, [Turn(answer(i), 5)] * turns, None, 0, "failure") for i in EXAM.items]
    return build_report(EXAM, items, adapter="test", started_at="2026-11-30T00:00:00Z", elapsed_ms=1, key=key)


def sleeper(item: Any) -> str:
    name = item.args.get("function", "f")
    return f"```python\nimport time\ndef {name}(*args):\n    time.sleep(600)\n```"


async def register(client: Client, name: str) -> keys.SigningKey:
    key, card = new_card(name)
    r = await client.post("/v1/log/entries", content=body(card))
    assert r.status_code == 201, r.text
    return key


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    # A small sandbox budget: one sleeping answer (10 s wall limit) spends it, the rest fail unrun.
    return Settings(data_dir=tmp_path / "data", integrate_interval=0.05, max_body_bytes=16 * 1024 * 1024,
                    grading_slots=4, grading_budget=5.0)  # fmt: skip


async def test_oversized_reports_are_refused_before_grading(settings: Settings, dsn: str) -> None:
    async with AsyncTestClient(app=create_app(settings, dsn), timeout=60) as client:
        key = await register(client, "padder")
        cases = [
            (report(key, lambda i: "x" * (MAX_ANSWER_BYTES + 1)), "at most 65536 bytes"),
            (report(key, lambda i: "é" * (MAX_ANSWER_BYTES // 2 + 1)), "at most 65536 bytes"),
            (report(key, lambda i: "ok", turns=MAX_TURNS + 1), f"at most {MAX_TURNS} turns"),
            (report(key, lambda i: "y" * 60_000, turns=2), "(4194304 bytes at most)"),
        ]
        before = len((await client.get("/v1/log/entries", params={"start": 0})).json()["entries"])
        for envelope, words in cases:
            r = await client.post("/v1/reports", content=body(envelope))
            assert r.status_code == 413, r.text
            assert words in r.json()["detail"]
        r = await client.post("/v1/reports", content=b"x" * (MAX_REPORT_BYTES + 1))  # not read to the end
        assert r.status_code == 413 and r.headers["content-type"].startswith("application/problem+json")
        entries = (await client.get("/v1/log/entries", params={"start": 0})).json()["entries"]
        assert len(entries) == before
