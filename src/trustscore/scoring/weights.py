"""Weights files: the published, versioned parameters of a scoring model.

A weights file is TOML validated against a strict schema (unknown keys are refused, and so are unknown
or newer schema versions). Everything a model uses is in its file; the engine has no hidden constants.
Released files are immutable: :data:`RELEASED_DIGESTS` pins the sha256 of each, and a file that claims a
released ``model_version`` with other bytes is refused. See ``docs/methodology.md``.
"""

from __future__ import annotations

import hashlib
import itertools
import math
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from statistics import NormalDist

import msgspec

from trustscore import resources
from trustscore.errors import ConfigError, InvalidInput, NotFound, UnsupportedKind
from trustscore.scoring.times import parse_time

SCHEMA = "trustscore.weights"
SCHEMA_VERSION = 1

#: sha256 of every released weights file, by model version. A released file never changes.
RELEASED_DIGESTS: dict[str, str] = {
    "baseline-v0.3": "6a315a7afc49ea47c1dccd4163ceebdc126b9ce0c3fcb7840c32b70631db65af",
    "trustscore-v1": "bc81817430ba3516edb7981625d69b6ac0835dfa472745c31019ecbeaefde166",
    "trustscore-v2": "064b79546aa460ba70ff6dbca72bade180a761928f725a27f62ee51db5031dc9",
    "trustscore-v3": "9aa9100dc7ef8d188efeaa37ce02a57448a12659596cebdac1c5e533288114a1",
}

_NAME = re.compile(r"[a-z][a-z0-9_-]*", re.ASCII)
_VERSION = re.compile(r"[a-z][a-z0-9._-]*", re.ASCII)
#: The published weights files, ``<model_version>.toml`` (shipped inside the package too).
PUBLISHED_DIR = resources.path("weights")


class SourcesSection(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    default_weight: float
    weights: dict[str, float]
    value_caps: dict[str, float] = {}


class OutcomesSection(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    success: float
    partial: float
    failure: float


class TotalSection(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    scale: float
    coverage_base: float
    coverage_slope: float


class ReliabilitySection(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    dimension: str
    evidence_share: float
    drift_tolerance: float
    snapshot_only_cap: float
    #: Whether snapshot consistency C counts at all. trustscore-v2: false, because C reads the model's
    #: own earlier totals, so anything that moves a total a little (a pool of fresh reporters) moved it
    #: again, several times over, through C (docs/methodology.md, "Known attacks and limits").
    use_snapshots: bool = True


class FreshnessSection(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    half_life_days: float


class ConfidenceSection(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    saturation_n: float
    size_share: float


class DecaySection(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """Per-item decay with one half-life. With an ``anchor`` (an RFC 3339 UTC time; trustscore-v3) item
    weights are taken relative to it and the cell sums scaled to the rating time by one factor
    (:mod:`trustscore.scoring.anchored`); without one (trustscore-v1, v2) each item is decayed at the
    rating time."""

    half_life_days: float
    anchor: str | None = None


class UncertaintySection(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    interval_level: float
    min_effective_n: float


class ShrinkageSection(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """trustscore-v2: a dimension's score is ``100 · Σ(w·v) / max(Σw, prior_weight)`` (thin evidence is
    pulled towards 0 as if padded with failing weight, instead of being suppressed), and reliability never
    falls below its snapshot-only value when evidence is added. Both make the total monotone."""

    prior_weight: float


class IssuersSection(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    max_share: float
    exempt: list[str] = []


class WeightsFile(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    """The schema of a weights file (version 1)."""

    schema: str
    schema_version: int
    model_version: str
    description: str
    dimensions: dict[str, float]
    sources: SourcesSection
    outcomes: OutcomesSection
    total: TotalSection
    reliability: ReliabilitySection
    freshness: FreshnessSection
    confidence: ConfidenceSection
    grades: dict[str, int]
    decay: DecaySection | None = None
    uncertainty: UncertaintySection | None = None
    issuers: IssuersSection | None = None
    shrinkage: ShrinkageSection | None = None


@dataclass(frozen=True)
class Weights:
    """A validated weights file, with the digest of its exact bytes."""

    spec: WeightsFile
    digest: str

    @property
    def model_version(self) -> str:
        return self.spec.model_version

    @property
    def dimension_names(self) -> tuple[str, ...]:
        return tuple(self.spec.dimensions)

    @property
    def dimension_weights(self) -> tuple[float, ...]:
        return tuple(self.spec.dimensions.values())

    @property
    def reliability_index(self) -> int:
        return self.dimension_names.index(self.spec.reliability.dimension)

    @property
    def decay_anchor(self) -> int | None:
        """The decay anchor in microseconds since the epoch; None without an anchored ``[decay]``."""
        decay = self.spec.decay
        return None if decay is None or decay.anchor is None else parse_time(decay.anchor)

    @property
    def z(self) -> float:
        """The standard normal quantile of the two-sided interval level (uncertainty models only)."""
        if self.spec.uncertainty is None:
            raise ConfigError(f"{self.model_version} reports no intervals")
        return NormalDist().inv_cdf(0.5 + self.spec.uncertainty.interval_level / 2)

    def source_weight(self, source: str) -> float:
        return self.spec.sources.weights.get(source, self.spec.sources.default_weight)

    def value_cap(self, source: str) -> float:
        return self.spec.sources.value_caps.get(source, 1.0)

    def grade(self, total: int) -> str:
        """The first grade (in file order, thresholds descending) whose threshold ``total`` reaches."""
        for name, threshold in self.spec.grades.items():
            if total >= threshold:
                return name
        raise ConfigError(f"no grade of {self.model_version} covers total {total}")  # unreachable: last is 0


def load_weights(path: str | Path) -> Weights:
    """Read and validate a weights file."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read weights file {path}: {exc.strerror}") from exc
    return parse_weights(data, source=str(path))


def load_published(model: str, weights_dir: Path = PUBLISHED_DIR) -> Weights:
    """The published weights file of ``model`` (a name from a bundle or a request, so it is checked:
    InvalidInput for a name that is not a model version, NotFound when no such file is published)."""
    if len(model) > 64 or not _VERSION.fullmatch(model):
        raise InvalidInput(f"weights_model {model[:80]!r} is not a model version")
    path = weights_dir / f"{model}.toml"
    if not path.is_file():
        raise NotFound(f"no published weights file for model {model!r}")
    return load_weights(path)


def parse_weights(data: bytes, *, source: str = "weights") -> Weights:
    """Validate the bytes of a weights file; the digest is the sha256 of exactly these bytes."""
    try:
        raw = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{source}: not valid UTF-8 TOML: {exc}") from exc
    version = raw.get("schema_version")
    if raw.get("schema") != SCHEMA or not isinstance(version, int) or isinstance(version, bool):
        raise UnsupportedKind(f"{source}: not a {SCHEMA} file (needs schema and an integer schema_version)")
    if version != SCHEMA_VERSION:
        newer = "newer than this engine supports" if version > SCHEMA_VERSION else "unknown"
        raise UnsupportedKind(f"{source}: schema_version {version} is {newer} (supported: {SCHEMA_VERSION})")
    try:
        spec = msgspec.convert(raw, WeightsFile)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"{source}: {exc}") from exc
    _validate(spec, source)
    digest = hashlib.sha256(data).hexdigest()
    pinned = RELEASED_DIGESTS.get(spec.model_version)
    if pinned is not None and pinned != digest:
        raise ConfigError(
            f"{source}: claims released model {spec.model_version} but its sha256 {digest} is not the "
            f"released {pinned}; released weights never change, publish a new version instead"
        )
    return Weights(spec=spec, digest=digest)


def _validate(spec: WeightsFile, source: str) -> None:
    problems: list[str] = []

    def need(ok: bool, what: str) -> None:
        if not ok:
            problems.append(what)

    def unit(value: float, what: str, *, low_open: bool = False) -> None:
        ok = math.isfinite(value) and (value > 0.0 if low_open else value >= 0.0) and value <= 1.0
        need(ok, f"{what} must be in {'(0' if low_open else '[0'}, 1], got {value}")

    def positive(value: float, what: str) -> None:
        need(math.isfinite(value) and value > 0.0, f"{what} must be a positive number, got {value}")

    need(bool(_VERSION.fullmatch(spec.model_version)), "model_version must be a lower-case slug")
    need(len(spec.dimensions) > 0, "dimensions must not be empty")
    for name, weight in spec.dimensions.items():
        need(bool(_NAME.fullmatch(name)), f"dimension name {name!r} must be a lower-case slug")
        positive(weight, f"dimensions.{name}")
    unit(spec.sources.default_weight, "sources.default_weight", low_open=True)
    for name, weight in spec.sources.weights.items():
        unit(weight, f"sources.weights.{name}", low_open=True)
    for name, cap in spec.sources.value_caps.items():
        unit(cap, f"sources.value_caps.{name}")
    for name in ("success", "partial", "failure"):
        unit(getattr(spec.outcomes, name), f"outcomes.{name}")
    positive(spec.total.scale, "total.scale")
    unit(spec.total.coverage_base, "total.coverage_base")
    unit(spec.total.coverage_slope, "total.coverage_slope")
    need(spec.reliability.dimension in spec.dimensions, "reliability.dimension must name a dimension")
    unit(spec.reliability.evidence_share, "reliability.evidence_share")
    positive(spec.reliability.drift_tolerance, "reliability.drift_tolerance")
    need(
        0.0 <= spec.reliability.snapshot_only_cap <= 100.0,
        "reliability.snapshot_only_cap must be in [0, 100]",
    )
    positive(spec.freshness.half_life_days, "freshness.half_life_days")
    positive(spec.confidence.saturation_n, "confidence.saturation_n")
    unit(spec.confidence.size_share, "confidence.size_share")
    thresholds = list(spec.grades.values())
    need(len(thresholds) > 0, "grades must not be empty")
    need(
        all(a > b for a, b in itertools.pairwise(thresholds)),
        "grades must be listed from the highest threshold down",
    )
    need(bool(thresholds) and thresholds[-1] == 0, "the last grade must have threshold 0")
    if spec.decay is not None:
        positive(spec.decay.half_life_days, "decay.half_life_days")
        if spec.decay.anchor is not None:
            try:
                parse_time(spec.decay.anchor)
            except InvalidInput as exc:
                problems.append(f"decay.anchor: {exc}")
    if spec.uncertainty is not None:
        level = spec.uncertainty.interval_level
        need(0.0 < level < 1.0, "uncertainty.interval_level must be in (0, 1)")
        need(
            math.isfinite(spec.uncertainty.min_effective_n) and spec.uncertainty.min_effective_n >= 0.0,
            "uncertainty.min_effective_n must be >= 0",
        )
    if spec.issuers is not None:
        unit(spec.issuers.max_share, "issuers.max_share", low_open=True)
    if spec.shrinkage is not None:
        positive(spec.shrinkage.prior_weight, "shrinkage.prior_weight")
    if problems:
        raise ConfigError(f"{source}: " + "; ".join(problems))
