"""Settings: every field set by its environment variable, converted and range-checked in one place."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import pytest

from trustscore import settings
from trustscore.errors import ConfigError
from trustscore.settings import Settings


def test_every_field_is_set_by_the_variable_named_beside_it() -> None:
    source = Path(settings.__file__).read_text()
    for field in dataclasses.fields(Settings):
        assert settings.env_name(field.name) in source, field.name
    assert settings.from_env({}) == Settings()


def test_values_are_converted_from_strings() -> None:
    s = settings.from_env(
        {
            "TRUSTSCORE_PORT": "9000",
            "TRUSTSCORE_DATA_DIR": "/srv/ts",
            "TRUSTSCORE_KEY_RATE": "2.5",
            "TRUSTSCORE_OUTBOUND_ALLOW_LOOPBACK": "true",
            "TRUSTSCORE_DATABASE_URL": "postgresql://db/x",
            "TRUSTSCORE_SNAPSHOT_INTERVAL": "",  # empty: the default
            "TRUSTSCORE_RATING_LAG": "0",  # a refresh after every projection step
        }
    )
    assert s.rating_lag == 0.0
    assert (s.port, s.data_dir, s.key_rate, s.outbound_allow_loopback) == (9000, Path("/srv/ts"), 2.5, True)
    assert s.database_url == "postgresql://db/x" and s.snapshot_interval == Settings().snapshot_interval


@pytest.mark.parametrize(
    ("env", "words"),
    [
        ({"TRUSTSCORE_PORT": "99999"}, "setting port (TRUSTSCORE_PORT) = '99999': expected int <= 65535"),
        ({"TRUSTSCORE_PORT": "http"}, "expected int"),
        ({"TRUSTSCORE_KEY_RATE": "-1"}, "expected float >= 0"),
        ({"TRUSTSCORE_INTEGRATE_INTERVAL": "0"}, "expected float > 0"),
        ({"TRUSTSCORE_OUTBOUND_ALLOW_PRIVATE": "maybe"}, "expected bool"),
        ({"TRUSTSCORE_MAX_BODY_BYTES": "10"}, "expected int >= 1024"),
        ({"TRUSTSCORE_ROLE": "boss"}, "setting role (TRUSTSCORE_ROLE) = 'boss': invalid enum value"),
        ({"TRUSTSCORE_LEASE_POLL": "0"}, "expected float > 0"),
        ({"TRUSTSCORE_RATING_LAG": "-0.5"}, "expected float >= 0"),
        ({"TRUSTSCORE_RATING_LAG": "7200"}, "expected float <= 3600"),
        ({"TRUSTSCORE_TILE_CACHE_BYTES": "-1"}, "expected int >= 0"),
        ({"TRUSTSCORE_TILE_CACHE_BYTES": "64MiB"}, "(TRUSTSCORE_TILE_CACHE_BYTES) = '64MiB': expected int"),
        ({"TRUSTSCORE_TILE_WARM_INTERVAL": "-5"}, "expected float >= 0"),
        ({"TRUSTSCORE_REUSE_PORT": "often"}, "(TRUSTSCORE_REUSE_PORT) = 'often': expected bool"),
        ({"TRUSTSCORE_SHUTDOWN_GRACE": "0"}, "(TRUSTSCORE_SHUTDOWN_GRACE) = '0': expected int >= 1"),
        ({"TRUSTSCORE_SHUTDOWN_GRACE": "1.5"}, "(TRUSTSCORE_SHUTDOWN_GRACE) = '1.5': expected int"),
        (
            {"TRUSTSCORE_ADDRESS_CONNECTIONS": "-1"},
            "(TRUSTSCORE_ADDRESS_CONNECTIONS) = '-1': expected int >= 0",
        ),
    ],
)
def test_out_of_range_or_unparsable_values_are_refused(env: dict[str, str], words: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(words)):
        settings.from_env(env)


def test_flags_are_checked_like_the_environment() -> None:
    with pytest.raises(ConfigError, match="TRUSTSCORE_PORT"):
        Settings().with_overrides(port=0)
    with pytest.raises(ConfigError, match="unknown setting"):
        Settings().with_overrides(prot=1)
    assert Settings().with_overrides(port=None, host="::1").host == "::1"
    assert Settings().role == "all" and Settings().with_overrides(role="worker").role == "worker"
    assert Settings().reuse_port is False and Settings().with_overrides(reuse_port=True).reuse_port is True


def test_weak_sandbox_is_off_unless_the_operator_says_so() -> None:
    assert settings.from_env({}).sandbox_allow_weak is False
    assert settings.from_env({"TRUSTSCORE_SANDBOX_ALLOW_WEAK": "true"}).sandbox_allow_weak is True
    with pytest.raises(ConfigError, match="SANDBOX_ALLOW_WEAK"):
        settings.from_env({"TRUSTSCORE_SANDBOX_ALLOW_WEAK": "maybe"})


def test_grading_queue_settings_are_checked() -> None:
    s = settings.from_env({"TRUSTSCORE_GRADING_SLOTS": "8", "TRUSTSCORE_GRADING_BUDGET": "12.5"})
    assert (s.grading_slots, s.grading_budget, s.grading_wait) == (8, 12.5, 30.0)
    with pytest.raises(ConfigError, match="GRADING_SLOTS"):
        settings.from_env({"TRUSTSCORE_GRADING_SLOTS": "0"})


def test_ladder_settings_are_checked() -> None:
    s = settings.from_env({"TRUSTSCORE_LADDER_RULE": "ladder-rule@0", "TRUSTSCORE_STATS_FLOOR": "5"})
    assert (s.ladder_rule, s.stats_floor) == ("ladder-rule@0", 5)
    with pytest.raises(
        ConfigError,
        match=r"TRUSTSCORE_LADDER_RULE.*not a known rule \(ladder-rule@0, ladder-rule@1, ladder-rule@2\)",
    ):
        settings.from_env({"TRUSTSCORE_LADDER_RULE": "ladder-rule@9"})
    with pytest.raises(ConfigError, match="TRUSTSCORE_STATS_FLOOR"):
        settings.from_env({"TRUSTSCORE_STATS_FLOOR": "0"})


def test_served_models_are_checked() -> None:
    assert settings.from_env({}).served_models == ("trustscore-v2", "baseline-v0.3")
    s = settings.from_env({"TRUSTSCORE_MODELS": "trustscore-v2,trustscore-v3,baseline-v0.3"})
    assert s.served_models == settings.SERVABLE_MODELS
    for value, words in (
        ("trustscore-v3", "the default model trustscore-v2 must be served"),
        ("trustscore-v2,trustscore-v1", "unknown model 'trustscore-v1'"),
        ("trustscore-v2,", "unknown model ''"),
        ("trustscore-v2,trustscore-v2", "a model is named twice"),
    ):
        with pytest.raises(
            ConfigError, match=re.escape(f"setting models (TRUSTSCORE_MODELS) = {value!r}: {words}")
        ):
            settings.from_env({"TRUSTSCORE_MODELS": value})


def test_no_reuse_port_on_the_command_line_turns_the_environment_off() -> None:
    """--no-reuse-port overrides TRUSTSCORE_REUSE_PORT=1 (an env file shared with a worker, say)."""
    import argparse

    from trustscore.cli import serve

    parser = argparse.ArgumentParser()
    serve.register(parser.add_subparsers())
    env = {"TRUSTSCORE_REUSE_PORT": "1"}
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        assert serve.resolve_settings(parser.parse_args(["serve"])).reuse_port is True
        assert serve.resolve_settings(parser.parse_args(["serve", "--no-reuse-port"])).reuse_port is False
