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


def test_grading_queue_settings_are_checked() -> None:
    s = from_env({"TRUSTSCORE_GRADING_SLOTS": "8", "TRUSTSCORE_GRADING_BUDGET": "12.5"})
    assert (s.grading_slots, s.grading_budget, s.grading_wait) == (8, 12.5, 30.0)
    with pytest.raises(ConfigError, match="GRADING_SLOTS"):
        from_env({"TRUSTSCORE_GRADING_SLOTS": "0"})
