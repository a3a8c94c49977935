"""An app on a fresh database per test, driven through real HTTP semantics (AsyncTestClient)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from litestar import Litestar
from litestar.testing import AsyncTestClient

from trustscore.api.app import create_app
from trustscore.settings import Settings


@pytest.fixture
def settings(tmp_path: Path) -> Settings:
    return Settings(data_dir=tmp_path / "data", integrate_interval=0.05, max_body_bytes=2 * 1024 * 1024)


@pytest.fixture
async def client(settings: Settings, dsn: str) -> AsyncIterator[AsyncTestClient[Litestar]]:
    async with AsyncTestClient(app=create_app(settings, dsn)) as c:
        yield c
