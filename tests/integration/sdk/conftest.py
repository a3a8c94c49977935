from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
AGENTS = ROOT / "examples" / "agents"


@pytest.fixture(scope="session")
def serve() -> Iterator[Callable[[str, str], str]]:
    """Start (once per persona and API) a scripted agent server on 127.0.0.1; returns its base URL."""
    procs: dict[tuple[str, str], tuple[subprocess.Popen[str], str]] = {}

    def start(persona: str, api: str) -> str:
        if (persona, api) not in procs:
            proc = subprocess.Popen(
                [sys.executable, str(AGENTS / "serve.py"), "--persona", persona, "--api", api, "--port", "0"],
                stdout=subprocess.PIPE,
                text=True,
            )
            assert proc.stdout is not None
            line = proc.stdout.readline().strip()
            assert line.startswith("listening on "), line
            procs[(persona, api)] = (proc, line.removeprefix("listening on "))
        return procs[(persona, api)][1]

    yield start
    for proc, _ in procs.values():
        proc.kill()
        proc.wait()
