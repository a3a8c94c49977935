"""Configuration: one typed object built from the environment (and CLI flags) at start-up, passed in.

Every field of :class:`Settings` is set by the environment variable named beside it,
``TRUSTSCORE_`` + the field's name in capitals (``port`` by ``TRUSTSCORE_PORT``). Values are converted
and range-checked in one place, :func:`convert`, by msgspec (the library the service already uses for
every typed struct): ``TRUSTSCORE_PORT=99999`` or ``--port 99999`` is refused with a one-line
:class:`ConfigError` naming the variable, never half-applied.
"""

from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

import msgspec

from trustscore.errors import ConfigError
from trustscore.ladder.rule import CURRENT_RULE as LADDER_CURRENT_RULE
from trustscore.ladder.rule import RULES as LADDER_RULES

ENV_PREFIX = "TRUSTSCORE_"

DEFAULT_MAX_BATCH = 1000  # envelopes per POST /v1/log/entries
ROLES = ("all", "api", "worker")  # what a `trustscore serve` process does (docs/operations.md)
#: The models a server can serve (docs/methodology.md, "Served models"); the first is the default and
#: is always served.
SERVABLE_MODELS = ("trustscore-v2", "trustscore-v3", "baseline-v0.3")

Port = Annotated[int, msgspec.Meta(ge=1, le=65535)]
Seconds = Annotated[float, msgspec.Meta(ge=0, le=365 * 86_400)]  # 0 where noted: "off" or "only on demand"
Interval = Annotated[float, msgspec.Meta(gt=0, le=86_400)]
Count = Annotated[int, msgspec.Meta(ge=0, le=2**31 - 1)]
Positive = Annotated[int, msgspec.Meta(ge=1, le=2**31 - 1)]
Rate = Annotated[float, msgspec.Meta(ge=0, le=1e9)]
Bytes = Annotated[int, msgspec.Meta(ge=1024, le=1024**3)]
CacheBytes = Annotated[int, msgspec.Meta(ge=0, le=1024**4)]


PublicUrl = Annotated[str, msgspec.Meta(max_length=2048, pattern=r"^https?://[A-Za-z0-9.:\[\]-]+(/[!-~]*)?$")]


@dataclass(frozen=True)
class Settings:
    """The server's settings; each field's environment variable is named beside it."""

    host: str = "127.0.0.1"  # TRUSTSCORE_HOST: address to listen on
    port: Port = 8080  # TRUSTSCORE_PORT
    data_dir: Path = Path(".trustscore")  # TRUSTSCORE_DATA_DIR: log key, embedded PostgreSQL
    database_url: str | None = None  # TRUSTSCORE_DATABASE_URL; None: the embedded PostgreSQL in data_dir/pg
    # TRUSTSCORE_READ_DATABASE_URL: a streaming replica of the database that serves public reads
    # (docs/operations.md, "Read replicas"); None: reads go to the primary too
    read_database_url: str | None = None
    log_origin: str = "trustscore.local/log"  # TRUSTSCORE_LOG_ORIGIN: the checkpoint's origin line
    integrate_interval: Interval = 0.2  # TRUSTSCORE_INTEGRATE_INTERVAL: seconds between integrator runs
    integrate_batch: Positive = 50_000  # TRUSTSCORE_INTEGRATE_BATCH: at most this many entries per step
    max_body_bytes: Bytes = 16 * 1024 * 1024  # TRUSTSCORE_MAX_BODY_BYTES: request body limit
    max_batch: Positive = DEFAULT_MAX_BATCH  # TRUSTSCORE_MAX_BATCH: envelopes per POST /v1/log/entries
    max_page: Positive = 1000  # TRUSTSCORE_MAX_PAGE: entries per GET /v1/log/entries page
    # TRUSTSCORE_MAX_PAGE_BYTES: leaf bytes per GET /v1/log/entries page (a page holds at least one entry)
    max_page_bytes: Bytes = 4 * 1024 * 1024
    pool_min: Positive = 2  # TRUSTSCORE_POOL_MIN: database connections kept open
    pool_max: Positive = 10  # TRUSTSCORE_POOL_MAX: database connections at most
    project_interval: Interval = 0.1  # TRUSTSCORE_PROJECT_INTERVAL: seconds between projector runs
    # TRUSTSCORE_RATING_LAG: seconds ratings may lag the projection while entries keep arriving (they
    # catch up on the first projector run that finds nothing new; docs/service.md, "From log to ratings")
    rating_lag: Annotated[float, msgspec.Meta(ge=0, le=3600)] = 1.0
    rating_refresh_interval: Interval = 60.0  # TRUSTSCORE_RATING_REFRESH_INTERVAL: full recompute (decay)
    snapshot_interval: Interval = 3600.0  # TRUSTSCORE_SNAPSHOT_INTERVAL: seconds between rating snapshots
    # TRUSTSCORE_TILE_CACHE_BYTES: memory for the hash tiles held for proofs, and as much again for tiles
    # served at /tile (docs/tiles.md); 0 holds none
    tile_cache_bytes: CacheBytes = 64 * 1024 * 1024
    # TRUSTSCORE_TILE_WARM_INTERVAL: seconds between fills of the free proof cache with the newest full
    # tiles, the first at start (docs/tiles.md, "Proofs from memory"); 0: off, tiles are read on first use
    tile_warm_interval: Seconds = 300.0
    key_rate: Rate = 50.0  # TRUSTSCORE_KEY_RATE: entries per second per signer key (0: unlimited)
    key_burst: Positive = 2000  # TRUSTSCORE_KEY_BURST: entries a key may write at once
    address_rate_per_minute: Count = 6000  # TRUSTSCORE_ADDRESS_RATE_PER_MINUTE: entries/min/address (0: off)
    address_burst: Positive = 1000  # TRUSTSCORE_ADDRESS_BURST: entries an address may write at once
    # TRUSTSCORE_ADDRESS_CONNECTIONS: connections one client address may hold open at once, per serving
    # process (docs/service.md); 0: no bound (behind a proxy, whose one address would otherwise be bounded)
    address_connections: Count = 256
    reverify_interval: Seconds = 86_400.0  # TRUSTSCORE_REVERIFY_INTERVAL: scheduled runs (0: after reports)
    reverify_k: Count = 10  # TRUSTSCORE_REVERIFY_K: public items re-asked per run
    reverify_k_private: Count = 3  # TRUSTSCORE_REVERIFY_K_PRIVATE: private items asked per run
    reverify_k_fresh: Annotated[int, msgspec.Meta(ge=0, le=16)] = (
        3  # TRUSTSCORE_REVERIFY_K_FRESH: fresh items
    )
    reverify_deadline: Interval = 120.0  # TRUSTSCORE_REVERIFY_DEADLINE: seconds a whole run may take
    scope_interval: Annotated[float, msgspec.Meta(ge=1, le=365 * 86_400)] = (
        604_800.0  # TRUSTSCORE_SCOPE_INTERVAL: seconds between server scope runs of each agent (weekly)
    )
    scope_deadline: Interval = 600.0  # TRUSTSCORE_SCOPE_DEADLINE: seconds a whole server scope run may take
    outbound_allow_loopback: bool = (
        False  # TRUSTSCORE_OUTBOUND_ALLOW_LOOPBACK: let outbound calls reach 127/8
    )
    outbound_allow_private: bool = False  # TRUSTSCORE_OUTBOUND_ALLOW_PRIVATE: ... and RFC 1918, ULA, CGNAT
    # TRUSTSCORE_SANDBOX_ALLOW_WEAK: grade code items with the interpreter-level sandbox when the kernel
    # refuses namespaces or seccomp. Off: such a server refuses code items (docs/graders.md, "Sandbox").
    sandbox_allow_weak: bool = False
    grading_slots: Positive = 4  # TRUSTSCORE_GRADING_SLOTS: reports graded at once, one per signer
    grading_wait: Interval = 30.0  # TRUSTSCORE_GRADING_WAIT: seconds a report may wait for a slot (then 503)
    grading_budget: Interval = 30.0  # TRUSTSCORE_GRADING_BUDGET: sandbox seconds per report (docs/graders.md)
    sitting_deadline: Interval = 3600.0  # TRUSTSCORE_SITTING_DEADLINE: seconds to report a fresh sitting
    sitting_max_open: Positive = 4  # TRUSTSCORE_SITTING_MAX_OPEN: sittings one agent may hold open at once
    sitting_sweep_interval: Interval = 5.0  # TRUSTSCORE_SITTING_SWEEP_INTERVAL: expiry sweeps
    # TRUSTSCORE_SITTING_SCOPE_INTERVAL: at most one scope@1 sitting an agent starts itself, and one server
    # scope run a change of its card triggers, per this many seconds each (0: no limit); the weekly
    # scheduled runs are not limited by it (docs/scope-honesty.md)
    sitting_scope_interval: Seconds = 604_800.0
    # TRUSTSCORE_MODELS: the served models, comma-separated, of SERVABLE_MODELS; trustscore-v2 (the default)
    # must be one. trustscore-v3 is opt-in: every process on one database must serve the same set.
    models: Annotated[str, msgspec.Meta(max_length=200)] = "trustscore-v2,baseline-v0.3"
    # TRUSTSCORE_LADDER_RULE: the rung rule new ladder rows are written under (docs/evidence-ladder.md)
    ladder_rule: Annotated[str, msgspec.Meta(max_length=64)] = LADDER_CURRENT_RULE
    # Webhooks (docs/webhooks.md); targets obey outbound_allow_loopback / outbound_allow_private.
    webhook_interval: Interval = 0.5  # TRUSTSCORE_WEBHOOK_INTERVAL: seconds between idle dispatch rounds
    webhook_max_attempts: Annotated[int, msgspec.Meta(ge=1, le=100)] = 8  # TRUSTSCORE_WEBHOOK_MAX_ATTEMPTS
    webhook_backoff_base: Interval = 5.0  # TRUSTSCORE_WEBHOOK_BACKOFF_BASE: first retry after ~this (s)
    webhook_backoff_cap: Interval = 21_600.0  # TRUSTSCORE_WEBHOOK_BACKOFF_CAP: longest wait between tries
    webhook_rate: Rate = 10.0  # TRUSTSCORE_WEBHOOK_RATE: deliveries per second per subscription (0: no limit)
    webhook_burst: Positive = 50  # TRUSTSCORE_WEBHOOK_BURST: deliveries a subscription may get at once
    webhook_timeout: Interval = 10.0  # TRUSTSCORE_WEBHOOK_TIMEOUT: seconds one delivery may take in all
    # TRUSTSCORE_WEBHOOK_HOST_CONCURRENCY: deliveries in flight at once to one URL host (of 16 in all)
    webhook_host_concurrency: Annotated[int, msgspec.Meta(ge=1, le=16)] = 4
    # TRUSTSCORE_WEBHOOK_MAX_SUBSCRIPTIONS: subscriptions not revoked that one subscriber may hold
    webhook_max_subscriptions: Annotated[int, msgspec.Meta(ge=1, le=100_000)] = 100
    feed_length: Annotated[int, msgspec.Meta(ge=1, le=1000)] = 100  # TRUSTSCORE_FEED_LENGTH: Atom entries
    stats_floor: Annotated[int, msgspec.Meta(ge=1, le=1_000_000)] = 20  # TRUSTSCORE_STATS_FLOOR: min group n
    # TRUSTSCORE_SHUTDOWN_GRACE: seconds the requests in flight at a SIGTERM may take before they are
    # cancelled and the process stops (docs/operations.md, "Stopping")
    shutdown_grace: Annotated[int, msgspec.Meta(ge=1, le=3600)] = 30
    # TRUSTSCORE_ROLE: all (HTTP and background jobs), api (HTTP only) or worker (background jobs only)
    role: Literal["all", "api", "worker"] = "all"
    lease_poll: Interval = 1.0  # TRUSTSCORE_LEASE_POLL: seconds between tries to take a held job lease
    # TRUSTSCORE_REUSE_PORT: listen with SO_REUSEPORT, so that several processes of the same user serve one
    # port and the kernel spreads connections among them (docs/operations.md, "Several API processes")
    reuse_port: bool = False
    # TRUSTSCORE_PUBLIC_URL: the http(s) URL readers reach the service at (e.g. https://bureau.example), named
    # by the agent card, badges and feeds whatever a request's Host says (api/public_url.py); set it behind a
    # cache. None: each request's own Host, and those responses say Vary: Host
    public_url: PublicUrl | None = None

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

    @property
    def served_models(self) -> tuple[str, ...]:
        """The models this server serves, in the order given (:data:`SERVABLE_MODELS`)."""
        return tuple(self.models.split(","))

    def with_overrides(self, **overrides: Any) -> Settings:
        """These settings with ``overrides`` (None values ignored), converted and range-checked."""
        values = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        values.update({k: v for k, v in overrides.items() if v is not None})
        return convert(values)


def env_name(field: str) -> str:
    """The environment variable that sets ``field``."""
    return ENV_PREFIX + field.upper()


def _path(kind: type, value: Any) -> Any:
    if kind is Path and isinstance(value, str | Path):
        return Path(value)
    raise NotImplementedError(f"cannot convert to {kind}")


def convert(values: dict[str, Any]) -> Settings:
    """The one place settings are converted (strings from the environment too) and range-checked."""
    fields = {f.name for f in dataclasses.fields(Settings)}
    unknown = sorted(set(values) - fields)
    if unknown:
        raise ConfigError(f"unknown setting {unknown[0]}")
    plain = {k: str(v) if isinstance(v, Path) else v for k, v in values.items()}
    try:
        converted = msgspec.convert(plain, Settings, strict=False, dec_hook=_path)
    except msgspec.ValidationError as exc:
        message = str(exc)
        name = message.rsplit("$.", 1)[-1].strip("`") if "$." in message else "?"
        problem = message.split(" - at ", 1)[0].replace("`", "")
        given = plain.get(name)
        raise ConfigError(
            f"setting {name} ({env_name(name)}) = {given!r}: {problem[:1].lower()}{problem[1:]}"
        ) from exc
    if wrong := _models_problem(converted.served_models):
        raise ConfigError(f"setting models ({env_name('models')}) = {converted.models!r}: {wrong}")
    if converted.ladder_rule not in LADDER_RULES:
        raise ConfigError(
            f"setting ladder_rule ({env_name('ladder_rule')}) = {converted.ladder_rule!r}: "
            f"not a known rule ({', '.join(sorted(LADDER_RULES))})"
        )
    if converted.public_url is not None and (wrong := _public_url_problem(converted.public_url)):
        raise ConfigError(
            f"setting public_url ({env_name('public_url')}) = {converted.public_url!r}: {wrong}"
        )
    return converted


_HOST_LABEL = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?")


def _public_url_problem(url: str) -> str | None:
    """Why ``url`` cannot prefix the service's links, or None (the pattern has checked its characters)."""
    if "?" in url or "#" in url:
        return "a base URL has no query or fragment"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:
        return f"not a URL ({exc})"
    host = parts.hostname or ""
    if port == 0 or parts.netloc.endswith(":"):
        return "no port, or port 0"
    if ":" in host:  # an IPv6 literal: its brackets must close the host
        if not parts.netloc.startswith("[") or not re.fullmatch(r"\[[0-9A-Fa-f:.]+\](:\d+)?", parts.netloc):
            return f"{parts.netloc!r} is not an IPv6 host"
    elif not all(_HOST_LABEL.fullmatch(x) for x in host.removesuffix(".").split(".")):
        return f"{host!r} is not a host name"
    if any(c in url for c in '"<>\\`{}|^'):
        return "characters a link cannot hold as they are"
    return None


def _models_problem(models: tuple[str, ...]) -> str | None:
    """Why ``models`` cannot be served, or None."""
    if unknown := [m for m in models if m not in SERVABLE_MODELS]:
        return f"unknown model {unknown[0]!r} (servable: {', '.join(SERVABLE_MODELS)})"
    if SERVABLE_MODELS[0] not in models:
        return f"the default model {SERVABLE_MODELS[0]} must be served"
    if len(set(models)) != len(models):
        return "a model is named twice"
    return None


def from_env(env: dict[str, str] | None = None) -> Settings:
    """Settings from ``TRUSTSCORE_*`` environment variables; unset or empty ones keep their defaults."""
    env = dict(os.environ) if env is None else env
    values = {f.name: raw for f in dataclasses.fields(Settings) if (raw := env.get(env_name(f.name)))}
    return convert(values)
