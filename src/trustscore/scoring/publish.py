"""Published numbers: every float of a rating rounded to 10^-6, in one place (docs/methodology.md,
*Published precision*).

The engine computes in float64 and keeps every value exact (baseline-v0.3 is reproduced bit for bit, and
totals are rounded from unrounded scores). Only what leaves the process is rounded: the API's rating
body, the leaderboard and ``trustscore score`` all pass a rating through :func:`published`, so the
offline score of an exported log still equals the API bit for bit, and ``84.99999999999997`` is
published as ``85.0``. The step is the rating attestation's fixed point (×10^6, round half to even), so a
published number is exactly its attested integer / 10^6.
"""

from __future__ import annotations

import math

import msgspec

from trustscore.scoring.ratings import DimensionStats, Rating, Uncertainty

DECIMALS = 6
SCALE = 1_000_000  # 10**DECIMALS


def number(x: float) -> float:
    """``x`` rounded half to even to :data:`DECIMALS` places (the nearest float to that decimal)."""
    if not math.isfinite(x):
        raise ValueError(f"a published number must be finite, not {x!r}")
    return round(x * SCALE) / SCALE + 0.0  # + 0.0: never publish -0.0


def optional(x: float | None) -> float | None:
    return None if x is None else number(x)


def interval(pair: tuple[float, float] | None) -> tuple[float, float] | None:
    return None if pair is None else (number(pair[0]), number(pair[1]))


def published(rating: Rating) -> Rating:
    """``rating`` with every float rounded for publication (integers, strings and nulls unchanged)."""
    u = rating.uncertainty
    uncertainty = (
        None
        if u is None
        else Uncertainty(
            level=number(u.level),
            n_eff=number(u.n_eff),
            total_interval=u.total_interval,  # integers already
            dimensions={
                name: DimensionStats(n=s.n, n_eff=number(s.n_eff), interval=interval(s.interval))
                for name, s in u.dimensions.items()
            },
        )
    )
    return msgspec.structs.replace(
        rating,
        coverage=number(rating.coverage),
        confidence=optional(rating.confidence),
        dimensions={name: optional(score) for name, score in rating.dimensions.items()},
        uncertainty=uncertainty,
    )
