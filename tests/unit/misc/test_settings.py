"""Settings read from the environment: the sandbox policy (issue #17)."""

from __future__ import annotations

import pytest

from trustscore.errors import ConfigError
from trustscore.settings import from_env


def test_weak_sandbox_is_off_unless_the_operator_says_so() -> None:
    assert from_env({}).sandbox_allow_weak is False
    assert from_env({"TRUSTSCORE_SANDBOX_ALLOW_WEAK": "true"}).sandbox_allow_weak is True
    with pytest.raises(ConfigError, match="SANDBOX_ALLOW_WEAK"):
        from_env({"TRUSTSCORE_SANDBOX_ALLOW_WEAK": "maybe"})
