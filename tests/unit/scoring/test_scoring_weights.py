"""Weights files: schema validation, version checks and the pinned digests of released files."""

from __future__ import annotations

import hashlib

import pytest

from trustscore.errors import ConfigError, UnsupportedKind
from trustscore.scoring import load_weights, parse_weights
from trustscore.scoring.weights import RELEASED_DIGESTS

from .conftest import WEIGHTS, variant

# Pinned here independently of the code: a released weights file never changes.
RELEASED = {
    "baseline-v0.3": "6a315a7afc49ea47c1dccd4163ceebdc126b9ce0c3fcb7840c32b70631db65af",
    "trustscore-v1": "bc81817430ba3516edb7981625d69b6ac0835dfa472745c31019ecbeaefde166",
    "trustscore-v2": "064b79546aa460ba70ff6dbca72bade180a761928f725a27f62ee51db5031dc9",
    "trustscore-v3": "9aa9100dc7ef8d188efeaa37ce02a57448a12659596cebdac1c5e533288114a1",
}


@pytest.mark.parametrize("version", sorted(RELEASED))
def test_released_files_are_immutable(version: str) -> None:
    data = (WEIGHTS / f"{version}.toml").read_bytes()
    assert hashlib.sha256(data).hexdigest() == RELEASED[version]
    assert RELEASED_DIGESTS[version] == RELEASED[version]
    weights = load_weights(WEIGHTS / f"{version}.toml")
    assert weights.model_version == version
    assert weights.digest == RELEASED[version]


def test_baseline_numbers_are_the_published_ones() -> None:
    spec = load_weights(WEIGHTS / "baseline-v0.3.toml").spec
    assert spec.dimensions == {
        "capability": 0.20,
        "reliability": 0.20,
        "delivery": 0.15,
        "economic": 0.10,
        "collaboration": 0.10,
        "security": 0.10,
        "negotiation": 0.05,
        "integrity": 0.10,
    }
    assert spec.sources.weights == {
        "real": 1.0,
        "real-benchmark": 1.0,
        "arena": 1.0,
        "verified": 0.9,
        "benchmark": 0.6,
        "real-confidential": 0.5,
        "simulation": 0.4,
        "synthetic": 0.3,
        "self-reported": 0.2,
    }
    assert spec.sources.default_weight == 0.3
    assert spec.sources.value_caps == {"real-benchmark": 0.85}
    assert list(spec.grades.items()) == [
        ("AAA", 800),
        ("AA", 700),
        ("A", 600),
        ("BBB", 500),
        ("BB", 400),
        ("B", 300),
        ("CCC", 200),
        ("C", 0),
    ]
    assert spec.decay is None and spec.uncertainty is None and spec.issuers is None


def test_a_changed_released_file_is_refused() -> None:
    data = (WEIGHTS / "baseline-v0.3.toml").read_bytes().replace(b"capability = 0.20", b"capability = 0.25")
    with pytest.raises(ConfigError, match="released"):
        parse_weights(data)


def test_newer_schema_version_is_refused() -> None:
    data = (WEIGHTS / "trustscore-v1.toml").read_bytes().replace(b"schema_version = 1", b"schema_version = 2")
    with pytest.raises(UnsupportedKind, match="newer"):
        parse_weights(data)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("schema_version = 1", "schema_version = 0"),
        ('schema = "trustscore.weights"', 'schema = "other"'),
        ("schema_version = 1", 'schema_version = "1"'),
    ],
)
def test_unknown_schema_is_refused(old: str, new: str) -> None:
    with pytest.raises(UnsupportedKind):
        variant("test-schema", {old: new})


def test_unknown_keys_are_refused() -> None:
    with pytest.raises(ConfigError, match="unknown field"):
        variant("test-unknown", {"[decay]\n": "[decay]\nsecret_boost = 2.0\n"})


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("capability = 0.20", "capability = -0.20", "dimensions.capability"),
        ("verified = 0.9", "verified = 1.5", "sources.weights.verified"),
        ("interval_level = 0.90", "interval_level = 1.0", "interval_level"),
        ("AA = 700", "AA = 900", "highest threshold"),
        ('dimension = "reliability"', 'dimension = "uptime"', "reliability.dimension"),
        ("max_share = 0.25", "max_share = 0.0", "issuers.max_share"),
        ("half_life_days = 30.0\n\n# Wilson", "half_life_days = 0.0\n\n# Wilson", "decay.half_life_days"),
    ],
)
def test_bad_values_are_refused(old: str, new: str, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        variant("test-bad", {old: new})


def test_not_toml_is_refused() -> None:
    with pytest.raises(ConfigError, match="TOML"):
        parse_weights(b"this is = = not toml")


def test_missing_file_is_a_config_error(tmp_path: object) -> None:
    with pytest.raises(ConfigError, match="cannot read"):
        load_weights(WEIGHTS / "no-such-model.toml")
