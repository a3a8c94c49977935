"""The scripted example agents served over real local HTTP (the SDK tests' fixture)."""

from tests.integration.sdk.conftest import serve

__all__ = ["serve"]
