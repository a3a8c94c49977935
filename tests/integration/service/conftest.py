"""A real ``trustscore serve`` process on a real port, for concurrency, crash and end-to-end tests.

The process itself is :class:`trustscore.devserver.ServeProcess`, the one the demo and the benchmarks use.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from trustscore.devserver import ServeProcess, free_port

__all__ = ["ServerProcess", "free_port"]


class ServerProcess(ServeProcess):
    """The shared serve process, integrating every 50 ms so that tests see their entries in checkpoints
    quickly (a test's ``env`` can still override it)."""

    def __post_init__(self) -> None:
        self.env = {"TRUSTSCORE_INTEGRATE_INTERVAL": "0.05", **self.env}


@pytest.fixture
def server(tmp_path: Path, dsn: str) -> Iterator[ServerProcess]:
    s = ServerProcess(tmp_path / "data", dsn)
    s.start()
    yield s
    s.stop()
