"""Fixtures of the webhook tests: the store tests' migrated connection pool (for the tests that drive the
outbox directly) and a receiver that records what is POSTed to it."""

from collections.abc import Iterator

import pytest

from tests.integration.store.conftest import pool
from tests.integration.webhooks.receiver import Receiver

__all__ = ["pool", "receiver"]


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver().start()
    yield r
    r.stop()
