"""Medals: per dimension at most one of bronze, silver and gold, a pure function of a rating and its evidence.

The rules are a versioned file beside the weights file they belong to, naming that file by model version
and sha256: release 1 is ``weights/<model>.medals.toml``, release N > 1 ``weights/<model>.medals-N.toml``
(schema version 2, which says its ``release``). Released files never change (:data:`RELEASED_DIGESTS`);
a fix of the rules is a new release, and the newest release present is the one served
(:func:`find_medal_rules`). Every medal names the rules file it was awarded under by sha256. A dimension earns the highest medal whose
threshold its published score reaches, and only when

- at least ``min_real_items`` *real* items are counted in it: counted as the engine counts them (at or
  before the rating time, the newest per key), from a source not in ``unreal_sources`` and an issuer not in
  ``unreal_issuers`` (release 2: the standing pool), with a positive weight, and not a re-verification item
  (issuer in ``reverify_issuers``) other than a success; and
- its freshness factor ``0.5 ** (age of the newest real item in days / half_life_days)`` is at least
  ``min_freshness``.

Re-verification failures still count for the score (a lower score can lose a medal), never towards
eligibility. The rules are in docs/methodology.md ("Medals").
"""

from __future__ import annotations

import hashlib
import math
import tomllib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import msgspec
import numpy as np
from numpy.typing import NDArray

from trustscore.errors import ConfigError, UnsupportedKind
from trustscore.scoring.engine import _newest_per_key
from trustscore.scoring.inputs import F64, I64, RESULT_CODES, EvidenceBatch
from trustscore.scoring.kernels import rounded_powers_of_half
from trustscore.scoring.publish import SCALE, number, optional
from trustscore.scoring.ratings import Rating, row_dicts
from trustscore.scoring.times import MICROS_PER_DAY
from trustscore.scoring.weights import Weights

SCHEMA = "trustscore.medals"
#: Version 1: release 1 files. Version 2 adds ``release`` (>= 2) and ``unreal_issuers``.
SCHEMA_VERSIONS = (1, 2)
#: The most releases of one model's medals looked for (a bound on a directory scan, not a limit in use).
MAX_RELEASE = 99

#: sha256 of every released medals file, by the model version of the weights file it belongs to and the
#: release. Release 2 of trustscore-v2 and -v3: public exam items (source real-benchmark) and the standing
#: pool's items are not real evidence (docs/methodology.md, "Medals").
RELEASED_DIGESTS: dict[tuple[str, int], str] = {
    ("trustscore-v2", 1): "4d4fea069601f3e40448653cb0aa61c17148c53b23df71a38fd3c475893b7500",
    ("trustscore-v2", 2): "76e94101138f61f33c79f633ccac46abf331b2a3d20cc0a8a498ebb2f5f7058c",
    ("trustscore-v3", 1): "677c487dec5cbdba3719e264a1ee2ffc3a8ce8ab729c746440ff5bd0a4a583ce",
    ("trustscore-v3", 2): "b69cf05cd4615431694f3e244ec020ac789c4ca8d29c367a4a449bb394358199",
}

Medal = Literal["bronze", "silver", "gold"]
#: Medals from the highest down: a dimension gets the first whose threshold its score reaches.
MEDALS: tuple[Medal, ...] = ("gold", "silver", "bronze")

#: Why a dimension has no medal, in the order the conditions are checked.
NO_SCORE, TOO_FEW, STALE, BELOW = "no_score", "too_few_real_items", "stale", "below_bronze"
REASONS = (NO_SCORE, TOO_FEW, STALE, BELOW)


class Thresholds(msgspec.Struct, forbid_unknown_fields=True, frozen=True):
    bronze: float
    silver: float
    gold: float


class MedalsFile(msgspec.Struct, forbid_unknown_fields=True, frozen=True, kw_only=True):
    """The schema of a medals file (versions 1 and 2; ``release`` and ``unreal_issuers`` are version 2's)."""

    schema: str
    schema_version: int
    weights_model: str
    weights_digest: str
    description: str
    min_real_items: int
    min_freshness: float
    half_life_days: float
    unreal_sources: list[str]
    reverify_issuers: list[str]
    thresholds: dict[str, Thresholds]
    release: int = 1
    unreal_issuers: list[str] = []


@dataclass(frozen=True)
class MedalRules:
    """A validated medals file, with the digest of its exact bytes."""

    spec: MedalsFile
    digest: str


class DimensionMedal(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """One dimension's medal (None with ``reason`` when it has none), the real items counted towards
    it and the freshness factor of the newest of them (None when there is none)."""

    medal: Medal | None
    real_n: int
    freshness: float | None
    reason: str | None


class Medals(msgspec.Struct, frozen=True, kw_only=True, gc=False):
    """An agent's medals under one model: the rules file's digest and one entry per dimension."""

    rules_digest: str
    dimensions: dict[str, DimensionMedal]


def medals_path(weights_dir: Path, model_version: str, *, release: int = 1) -> Path:
    """Where a release of the medals of a weights file lives: beside it, named after its model version."""
    suffix = "" if release == 1 else f"-{release}"
    return weights_dir / f"{model_version}.medals{suffix}.toml"


def find_medal_rules(weights_dir: Path, weights: Weights) -> MedalRules | None:
    """The newest release of the medals of ``weights`` in ``weights_dir`` (the one served); None when the
    model has none (no medals)."""
    for release in range(MAX_RELEASE, 0, -1):
        path = medals_path(weights_dir, weights.model_version, release=release)
        if path.exists():
            rules = load_medal_rules(path, weights)
            if rules.spec.release != release:
                raise ConfigError(f"{path}: says release {rules.spec.release}, its name release {release}")
            model = weights.model_version
            if (model, release) not in RELEASED_DIGESTS and any(m == model for m, _ in RELEASED_DIGESTS):
                raise ConfigError(
                    f"{path}: release {release} of {model}'s medals is not pinned (RELEASED_DIGESTS)"
                )
            return rules
    return None


def load_medal_rules(path: Path, weights: Weights) -> MedalRules:
    """Read and validate the medals file at ``path`` for ``weights``."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read medals file {path}: {exc.strerror}") from exc
    return parse_medal_rules(data, weights, source=str(path))


def parse_medal_rules(data: bytes, weights: Weights, *, source: str = "medals") -> MedalRules:
    """Validate the bytes of a medals file against the weights file it names."""
    try:
        raw = tomllib.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{source}: not valid UTF-8 TOML: {exc}") from exc
    version = raw.get("schema_version")
    if raw.get("schema") != SCHEMA or not isinstance(version, int) or isinstance(version, bool):
        raise UnsupportedKind(f"{source}: not a {SCHEMA} file (needs schema and an integer schema_version)")
    if version not in SCHEMA_VERSIONS:
        raise UnsupportedKind(f"{source}: schema_version {version} is not supported (1 and 2 are)")
    later = sorted({"release", "unreal_issuers"} & raw.keys())
    if version == 1 and later:
        raise ConfigError(f"{source}: {' and '.join(later)} need schema_version 2")
    if version == 2 and "release" not in raw:
        raise ConfigError(f"{source}: schema_version 2 needs a release")
    try:
        spec = msgspec.convert(raw, MedalsFile)
    except msgspec.ValidationError as exc:
        raise ConfigError(f"{source}: {exc}") from exc
    digest = hashlib.sha256(data).hexdigest()
    problems = _problems(spec, weights)
    released = RELEASED_DIGESTS.get((spec.weights_model, spec.release))
    if released is not None and digest != released:
        problems.append(
            f"the released medals of {spec.weights_model} (release {spec.release}) have sha256 {released}, "
            f"not {digest}"
        )
    if problems:
        raise ConfigError(f"{source}: {'; '.join(problems)}")
    return MedalRules(spec, digest)


def _problems(spec: MedalsFile, weights: Weights) -> list[str]:
    out = []
    if (spec.weights_model, spec.weights_digest) != (weights.model_version, weights.digest):
        out.append(f"names weights {spec.weights_model} {spec.weights_digest}, not {weights.model_version}")
    if set(spec.thresholds) != set(weights.dimension_names):
        out.append(f"thresholds must name exactly the dimensions of {weights.model_version}")
    for name, t in spec.thresholds.items():
        if not 0.0 <= t.bronze <= t.silver <= t.gold <= 100.0:
            out.append(f"thresholds.{name} must be 0 <= bronze <= silver <= gold <= 100")
    if spec.min_real_items < 1:
        out.append("min_real_items must be at least 1")
    if not 1 <= spec.release <= MAX_RELEASE or (spec.schema_version == 2) != (spec.release > 1):
        out.append(f"release must be 1 (schema_version 1) or 2..{MAX_RELEASE} (schema_version 2)")
    if not (math.isfinite(spec.min_freshness) and 0.0 < spec.min_freshness <= 1.0):
        out.append("min_freshness must be in (0, 1]")
    if not (math.isfinite(spec.half_life_days) and spec.half_life_days > 0.0):
        out.append("half_life_days must be a positive number")
    return out


def award(
    score: float | None, real_n: int, freshness: float | None, t: Thresholds, rules: MedalsFile
) -> DimensionMedal:
    """One dimension's medal from its score (rounded as published), its real item count and its freshness factor."""
    score = optional(score)  # as published: 87.9999999999 is 88.0, and earns what 88 earns
    fresh = None if freshness is None else number(freshness)
    reason = None
    if score is None:
        reason = NO_SCORE
    elif real_n < rules.min_real_items:
        reason = TOO_FEW
    elif fresh is None or fresh < rules.min_freshness:
        reason = STALE
    medal: Medal | None = None
    if reason is None:
        assert score is not None
        medal = next((m for m in MEDALS if score >= getattr(t, m)), None)
        reason = None if medal is not None else BELOW
    return DimensionMedal(medal=medal, real_n=real_n, freshness=fresh, reason=reason)


def medals_of(evidence: EvidenceBatch, ratings: Sequence[Rating], rules: MedalRules, at: int) -> list[Medals]:
    """The medals of each rating (same order), from the evidence it was computed from at ``at``
    (microseconds since the epoch); rows of agents without a rating are ignored.

    Column-wise, with the same rules and rounding as :func:`award` (a test checks they agree cell by cell).
    """
    real_n, newest = real_items(evidence, [r.agent for r in ratings], rules, at)
    return award_columns(ratings, real_n, newest, rules, at)


def award_columns(
    ratings: Sequence[Rating], real_n: I64, newest: I64, rules: MedalRules, at: int
) -> list[Medals]:
    """The medals of each rating at ``at`` from its real item counts and newest real item times per medal
    dimension (:func:`real_items`, rows in the ratings' order): O(ratings), no pass over evidence."""
    spec = rules.spec
    dims = tuple(spec.thresholds)
    with np.errstate(over="ignore", invalid="ignore"):
        has = real_n > 0
        freshness = np.full(real_n.shape, np.nan)
        # The C library's pow, whatever numpy's vector width; rounded as publish.number.
        age = (at - newest[has]) / MICROS_PER_DAY / spec.half_life_days
        freshness[has] = rounded_powers_of_half(age, np.full(age.shape, SCALE), _to_scale) / SCALE
        raw = np.array([r.dimensions.get(d) for r in ratings for d in dims], dtype=np.float64).reshape(
            real_n.shape
        )
        score = np.round(raw * SCALE) / SCALE
        table = np.array([[getattr(spec.thresholds[d], m) for m in reversed(MEDALS)] for d in dims])
        rank = (score[:, :, None] >= table[None, :, :]).sum(axis=2)  # 0 none, 1 bronze, 2 silver, 3 gold
    reason: NDArray[np.int8] = np.full(real_n.shape, -1, dtype=np.int8)
    checks = (np.isnan(score), real_n < spec.min_real_items, ~(freshness >= spec.min_freshness), rank == 0)
    for code, failed in reversed(list(enumerate(checks))):  # the first failed check names the reason
        reason[failed] = code
    held: I64 = np.where(reason < 0, rank, 0).astype(np.int64)
    return [
        Medals(rules_digest=rules.digest, dimensions=dimensions)
        for dimensions in row_dicts(dims, _dimension_medals(real_n, freshness, held, reason))
    ]


def _to_scale(x: F64) -> F64:
    """``x`` (a freshness factor times :data:`SCALE`) to the nearest integer, as publish.number rounds."""
    return np.round(x)


#: A dimension without real items has one of these (by reason code), shared by every agent (frozen).
_NO_ITEMS = tuple(DimensionMedal(medal=None, real_n=0, freshness=None, reason=reason) for reason in REASONS)
_MEDAL_NAMES: tuple[Medal | None, ...] = (None, *reversed(MEDALS))  # by rank: 0 none, 1 bronze, ...


def _dimension_medals(
    real_n: I64, freshness: F64, held: I64, reason: NDArray[np.int8]
) -> list[DimensionMedal]:
    """Every (agent, dimension) cell's medal, row by row, from :func:`award_columns`' arrays: a cell
    without real items is the shared struct of its reason, the others are built (from flat lists, not a
    list per agent: fewer objects for the cycle collector to track)."""
    no_items = ((real_n == 0) & np.isnan(freshness) & (held == 0) & (reason >= 0)).ravel()
    cells = [_NO_ITEMS[r] for r in np.where(no_items, reason.ravel(), 0).tolist()]  # replaced where built
    built = np.flatnonzero(~no_items)  # indexes: gathers by a boolean mask are slower
    for cell, n, f, m, r in zip(
        built.tolist(),
        real_n.ravel()[built].tolist(),
        freshness.ravel()[built].tolist(),
        held.ravel()[built].tolist(),
        reason.ravel()[built].tolist(),
        strict=True,
    ):
        cells[cell] = DimensionMedal(
            medal=_MEDAL_NAMES[m],
            real_n=n,
            freshness=None if f != f else f + 0.0,
            reason=None if r < 0 else REASONS[r],
        )
    return cells


def real_items(evidence: EvidenceBatch, names: Sequence[str], rules: MedalRules, at: int) -> tuple[I64, I64]:
    """Per (agent of ``names``, medal dimension in file order): how many real items count at ``at``, and
    the time of the newest (int64 min where none). Only which rows count reads ``at``: the figures hold
    for every rating time at which the same rows count."""
    spec = rules.spec
    dims = tuple(spec.thresholds)
    shape = (len(names), len(dims))
    n = np.zeros(shape, dtype=np.int64)
    newest = np.full(shape, np.iinfo(np.int64).min, dtype=np.int64)
    if len(evidence) == 0 or not names:
        return n, newest
    evidence.check()
    position = {name: i for i, name in enumerate(names)}
    agent = np.array([position.get(a, -1) for a in evidence.agents], dtype=np.int64)[evidence.agent]
    dim_of = {name: i for i, name in enumerate(dims)}
    dim = np.array([dim_of.get(d, -1) for d in evidence.dimensions], dtype=np.int64)[evidence.dimension]
    keep = (agent >= 0) & (evidence.at <= at)
    keep &= _newest_per_key(agent, evidence.key, evidence.at, evidence.seq, keep)  # the rows the score counts
    unreal = np.array([s in spec.unreal_sources for s in evidence.sources], dtype=np.bool_)[evidence.source]
    # Issuer codes index these tables; -1 (no issuer) reads the last entry, False.
    unreal |= np.array([i in spec.unreal_issuers for i in evidence.issuers] + [False], dtype=np.bool_)[
        evidence.issuer
    ]
    reverify = np.array([i in spec.reverify_issuers for i in evidence.issuers] + [False], dtype=np.bool_)
    failed_reverify = reverify[evidence.issuer] & (evidence.result != RESULT_CODES["success"])
    real = keep & (dim >= 0) & ~unreal & ~failed_reverify & (evidence.extra_weight > 0.0)
    rows = np.flatnonzero(real)
    cell = agent[rows] * len(dims) + dim[rows]
    n.reshape(-1)[:] = np.bincount(cell, minlength=n.size)
    np.maximum.at(newest.reshape(-1), cell, evidence.at[rows])
    return n, newest
