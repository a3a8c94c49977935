"""Configuration: one typed object built from the environment (and CLI flags) at start-up, passed in."""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from trustscore.errors import ConfigError

ENV_PREFIX = "TRUSTSCORE_"


DEFAULT_MAX_BATCH = 1000  # envelopes per POST /v1/log/entries


@dataclass(frozen=True)
class Settings:
    host: str = "127.0.0.1"
    port: int = 8080
    data_dir: Path = Path(".trustscore")
    database_url: str | None = None  # None: the embedded PostgreSQL in data_dir/pg
    log_origin: str = "trustscore.local/log"
    integrate_interval: float = 0.2  # seconds between integrator runs
    integrate_batch: int = 50_000  # at most this many entries per checkpoint step
    max_body_bytes: int = 16 * 1024 * 1024
    max_batch: int = DEFAULT_MAX_BATCH
    max_page: int = 1000
    pool_min: int = 2
    pool_max: int = 10
    project_interval: float = 0.1  # seconds between projector runs (evidence -> ratings)
    rating_refresh_interval: float = 60.0  # full recompute of every rating at a new time (decay)
    snapshot_interval: float = 3600.0  # seconds between logged rating snapshots
    key_rate: float = 50.0  # writes per second per signer key (0: unlimited)
    key_burst: int = 2000  # entries a key may write at once
    address_rate_per_minute: int = 6000  # POSTs per minute per client address (0: unlimited)
    reverify_interval: float = 86_400.0  # scheduled re-verification of every agent (0: only after reports)
    reverify_k: int = 10  # public items re-asked per run
    reverify_k_private: int = 3  # private items asked per run (when a private exam dir is configured)
    reverify_deadline: float = 120.0  # seconds a whole run may take
    outbound_allow_loopback: bool = False  # let re-verification call loopback addresses (tests, demos)
    outbound_allow_private: bool = False  # ... and private networks (RFC 1918, ULA, CGNAT)
    # Grade code items with the interpreter-level sandbox when the kernel refuses namespaces or seccomp
    # (TRUSTSCORE_SANDBOX_ALLOW_WEAK). Off: such a server refuses code items (docs/graders.md, "Sandbox").
    sandbox_allow_weak: bool = False
    grading_slots: int = 4  # reports graded at once, one per signer (TRUSTSCORE_GRADING_SLOTS)
    grading_wait: float = 30.0  # seconds a report may wait for a slot before 503 (TRUSTSCORE_GRADING_WAIT)
    grading_budget: float = 30.0  # sandbox seconds per report (TRUSTSCORE_GRADING_BUDGET), docs/graders.md

    @property
    def log_key_file(self) -> Path:
        return self.data_dir / "log.key"

    @property
    def reverify_key_file(self) -> Path:
        return self.data_dir / "reverify.key"

    @property
    def service_key_file(self) -> Path:
        return self.data_dir / "service.key"

    @property
    def pg_dir(self) -> Path:
        return self.data_dir / "pg"

    def with_overrides(self, **overrides: Any) -> Settings:
        return replace(self, **{k: v for k, v in overrides.items() if v is not None})


def _int(name: str, raw: str) -> int:
    try:
        return int(raw)
    except ValueError as exc:
        raise ConfigError(f"{ENV_PREFIX}{name} must be an integer, got {raw!r}") from exc


def _float(name: str, raw: str) -> float:
    try:
        return float(raw)
    except ValueError as exc:
        raise ConfigError(f"{ENV_PREFIX}{name} must be a number, got {raw!r}") from exc


def _bool(name: str, raw: str) -> bool:
    if raw.lower() in ("1", "true", "yes", "on"):
        return True
    if raw.lower() in ("0", "false", "no", "off"):
        return False
    raise ConfigError(f"{ENV_PREFIX}{name} must be true or false, got {raw!r}")


def from_env(env: dict[str, str] | None = None) -> Settings:
    """Settings from ``TRUSTSCORE_*`` environment variables; unset ones keep their defaults."""
    env = dict(os.environ) if env is None else env
    s = Settings()

    def get(name: str) -> str | None:
        return env.get(ENV_PREFIX + name) or None

    overrides: dict[str, Any] = {
        "host": get("HOST"),
        "data_dir": Path(v) if (v := get("DATA_DIR")) else None,
        "database_url": get("DATABASE_URL"),
        "log_origin": get("LOG_ORIGIN"),
        "port": _int("PORT", v) if (v := get("PORT")) else None,
        "integrate_interval": _float("INTEGRATE_INTERVAL", v) if (v := get("INTEGRATE_INTERVAL")) else None,
        "max_body_bytes": _int("MAX_BODY_BYTES", v) if (v := get("MAX_BODY_BYTES")) else None,
        "snapshot_interval": _float("SNAPSHOT_INTERVAL", v) if (v := get("SNAPSHOT_INTERVAL")) else None,
        "key_rate": _float("KEY_RATE", v) if (v := get("KEY_RATE")) else None,
        "address_rate_per_minute": _int("ADDRESS_RATE_PER_MINUTE", v)
        if (v := get("ADDRESS_RATE_PER_MINUTE"))
        else None,
        "reverify_interval": _float("REVERIFY_INTERVAL", v) if (v := get("REVERIFY_INTERVAL")) else None,
        "reverify_deadline": _float("REVERIFY_DEADLINE", v) if (v := get("REVERIFY_DEADLINE")) else None,
        "outbound_allow_loopback": _bool("OUTBOUND_ALLOW_LOOPBACK", v)
        if (v := get("OUTBOUND_ALLOW_LOOPBACK"))
        else None,
        "outbound_allow_private": _bool("OUTBOUND_ALLOW_PRIVATE", v)
        if (v := get("OUTBOUND_ALLOW_PRIVATE"))
        else None,
        "grading_slots": _int("GRADING_SLOTS", v) if (v := get("GRADING_SLOTS")) else None,
        "grading_wait": _float("GRADING_WAIT", v) if (v := get("GRADING_WAIT")) else None,
        "grading_budget": _float("GRADING_BUDGET", v) if (v := get("GRADING_BUDGET")) else None,
        "sandbox_allow_weak": _bool("SANDBOX_ALLOW_WEAK", v) if (v := get("SANDBOX_ALLOW_WEAK")) else None,
    }
    out = s.with_overrides(**overrides)
    if out.grading_slots < 1 or out.grading_wait <= 0 or out.grading_budget <= 0:
        raise ConfigError(f"{ENV_PREFIX}GRADING_SLOTS must be >= 1, GRADING_WAIT and GRADING_BUDGET > 0")
    return out
