"""Review of merge 410e645: identical reports (and the same answers under new nonces) posted at once.
The same answers again are the first report (issue #10): one 201, the rest 200 with its index."""

from __future__ import annotations

import asyncio
import collections
from typing import Any

from litestar.testing import AsyncTestClient

from tests.helpers import new_card
from tests.integration.api.test_integrity_writes import body, integrity_run, renonce
from trustscore.api.app import create_app
from trustscore.sdk.runner import sign_run
from trustscore.settings import Settings

__all__ = ["integrity_run"]


async def test_identical_reports_at_once_are_one_report(
    settings: Settings, dsn: str, integrity_run: Any
) -> None:
    async with AsyncTestClient(app=create_app(settings, dsn)) as client:
        key, card = new_card("examinee")
        assert (await client.post("/v1/log/entries", content=body(card))).status_code == 201
        envelope = sign_run(integrity_run, key)
        copies = [envelope] * 12 + [
            renonce(envelope, key, f"another-nonce-{n:04d}-xxxxxxxx") for n in range(12)
        ]
        replies = await asyncio.gather(*(client.post("/v1/reports", content=body(c)) for c in copies))
        codes = collections.Counter(r.status_code for r in replies)
        texts = sorted({r.text[:160] for r in replies if r.status_code >= 400})
        assert codes[201] == 1 and codes[200] == len(copies) - 1, (codes, texts)
