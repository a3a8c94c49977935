"""The store tests' migrated connection pool, for the service tests that drive a service on it directly."""

from __future__ import annotations

from tests.integration.store.conftest import pool

__all__ = ["pool"]
