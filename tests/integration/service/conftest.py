"""A real ``trustscore serve`` process on a real port, for concurrency, crash and end-to-end tests.

The process itself is :class:`trustscore.devserver.ServeProcess`, the one the demo and the benchmarks use.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import ParamSpec, Protocol, TypeVar

import pytest

from trustscore.devserver import ServeProcess, free_port

__all__ = ["ServerProcess", "free_port", "running", "stopping"]


class Stoppable(Protocol):
    def stop(self) -> None: ...


S = TypeVar("S", bound=Stoppable)
P = ParamSpec("P")


class ServerProcess(ServeProcess):
    """The shared serve process, integrating every 50 ms so that tests see their entries in checkpoints
    quickly (a test's ``env`` can still override it)."""

    def __post_init__(self) -> None:
        self.env = {"TRUSTSCORE_INTEGRATE_INTERVAL": "0.05", **self.env}


@contextlib.contextmanager
def running(tmp_path: Path, dsn: str, env: Mapping[str, str] | None = None) -> Iterator[ServerProcess]:
    """A started server with ``env`` on ``dsn`` (data in ``tmp_path``), stopped at exit."""
    s = ServerProcess(tmp_path / "data", dsn, env=dict(env or {}))
    s.start()
    try:
        yield s
    finally:
        s.stop()


@contextlib.contextmanager
def stopping(make: Callable[P, S]) -> Iterator[Callable[P, S]]:
    """``make`` (-> a started process), each process it made stopped at exit."""
    made: list[S] = []

    def tracked(*args: P.args, **kwargs: P.kwargs) -> S:
        made.append(make(*args, **kwargs))
        return made[-1]

    try:
        yield tracked
    finally:
        for m in made:
            m.stop()


@pytest.fixture
def server(tmp_path: Path, dsn: str) -> Iterator[ServerProcess]:
    with running(tmp_path, dsn) as s:
        yield s
