"""Decay anchored in time (trustscore-v3): time-independent item weights and one factor per rating time.

With one half-life h, an item's decayed weight ``sw · 0.5^((at − t_i)/h) · extra`` is, for any fixed time
t₀ (the model's ``[decay] anchor``), ``w_i · D(at)`` with ``w_i = sw · 2^((t_i − t₀)/h) · extra``, which does
not read the rating time, and ``D(at) = 2^(−(at − t₀)/h)``, one number per rating time. A model with an
anchor *defines* its decayed cell sums as ``D(at) · Σ w_i`` (ascending-order sums of the ``w_i``), so the
sums can be kept and a rating moved to a new time with one multiplication per cell, bit for bit the full
recompute (docs/methodology.md, "trustscore-v3").

Both exponents are computed by one expression, :func:`exponent`: ``((t − t₀) / 86 400 000 000) / h``
(the integer microsecond difference, exact in int64, divided in float64 by the microseconds in a day,
then by the half-life in days), and raised by :func:`exp2`, which uses only IEEE-754 additions and
multiplications (correctly rounded everywhere) and an exact scaling by a power of two: unlike a libm or
SIMD ``pow``/``exp2``, whose last bits vary between machines and numpy builds, it gives the same bits on
every platform.

**Range.** ``2^x`` overflows float64 at x = 1024 (84.1 years at h = 30 days) and loses precision below
x = −1022. Times whose exponent exceeds :data:`RANGE_HALF_LIVES` in magnitude are refused: within it
every ``w_i`` (≤ 2^960) and every sum of fewer than 2^63 of them stays finite, and every weight
``sw · extra ≥ 2^−62`` stays a normal number.
"""

from __future__ import annotations

import decimal
import math

import numpy as np

from trustscore.errors import InvalidInput
from trustscore.scoring.kernels import F64, I64
from trustscore.scoring.times import MICROS_PER_DAY, format_time

#: The largest |exponent| (in half-lives from the anchor) of an evidence or rating time an anchored
#: model accepts: 2^960 leaves 2^63 of headroom below float64's 2^1024 for sums of item weights.
RANGE_HALF_LIVES = 960


def _taylor_coefficients(degree: int) -> tuple[float, ...]:
    """``(ln 2)^k / k!`` for k = 0..degree, each the float64 nearest its value (computed in decimal to 60
    digits, in software: the same on every platform)."""
    with decimal.localcontext() as context:
        context.prec = 60
        ln2 = decimal.Decimal(2).ln()
        return tuple(float(ln2**k / math.factorial(k)) for k in range(degree + 1))


#: 2^f = Σ (f·ln 2)^k / k! on |f| <= 1/2; the first term left out is below 2^-57 of the sum.
_COEFFICIENTS = _taylor_coefficients(13)


def exp2(x: F64) -> F64:
    """``2^x`` per element, bit-reproducible: k = round-half-even(x), f = x − k (exact, |f| <= 1/2),
    ``2^f`` by Horner's rule on the Taylor polynomial of degree 13 (:data:`_COEFFICIENTS`, highest first),
    then ``ldexp(2^f, k)`` (exact). Measured within 1.09 ulp of 2^x (libm's exp2: 0.504), exact at
    integers; |x| must be at most 1021.

    Evaluated :data:`_BLOCK` elements at a time, so the polynomial's 26 passes read and write the CPU's
    cache rather than memory (about twice as fast over 10^6 elements); every element goes through the
    same operations, so the bits are those of one pass over the whole array."""
    out = np.empty(x.shape)
    flat_x, flat_out = x.reshape(-1), out.reshape(-1)
    p = np.empty(min(flat_x.size, _BLOCK))
    f = np.empty_like(p)
    for start in range(0, flat_x.size, _BLOCK):
        block = flat_x[start : start + _BLOCK]
        k = np.rint(block)
        bp, bf = p[: block.size], f[: block.size]
        np.subtract(block, k, out=bf)
        bp.fill(_COEFFICIENTS[-1])
        for c in reversed(_COEFFICIENTS[:-1]):  # p = p · f + c, in place (the same roundings)
            bp *= bf
            bp += c
        np.ldexp(bp, k.astype(np.int64), out=flat_out[start : start + block.size])
    return out


#: Elements per block of :func:`exp2`: its two work arrays (2 × 128 KiB) stay in a core's L2 cache.
_BLOCK = 1 << 14


def exponent(times: I64, anchor: int, half_life_days: float) -> F64:
    """``((t − anchor) / 86 400 000 000) / half_life_days`` per time: its half-lives after the anchor."""
    return ((times - anchor) / MICROS_PER_DAY) / half_life_days


def anchored_factors(when: I64, anchor: int, half_life_days: float) -> F64:
    """``2^x`` per item time, x its :func:`exponent`; raises InvalidInput outside the range."""
    x = exponent(when, anchor, half_life_days)
    _check(x, when, anchor, half_life_days, "evidence time")
    return exp2(x)


def decay_factor(at: int, anchor: int, half_life_days: float) -> float:
    """``D(at) = 2^(−x)``, x the :func:`exponent` of the rating time; raises InvalidInput outside the range."""
    times = np.array([at], dtype=np.int64)
    x = exponent(times, anchor, half_life_days)
    _check(x, times, anchor, half_life_days, "rating time")
    return float(exp2(-x)[0])


def _check(x: F64, times: I64, anchor: int, half_life_days: float, what: str) -> None:
    outside = np.flatnonzero(~(np.abs(x) <= RANGE_HALF_LIVES))
    if outside.size:
        raise InvalidInput(
            f"{what} {_shown(int(times[outside[0]]))} is more than {RANGE_HALF_LIVES} half-lives "
            f"({RANGE_HALF_LIVES * half_life_days:g} days) from the decay anchor {format_time(anchor)}"
        )


def _shown(micros: int) -> str:
    """An RFC 3339 time, or the microseconds where no calendar date has them (beyond year 9999)."""
    try:
        return format_time(micros)
    except (OverflowError, ValueError):
        return f"{micros} µs since the epoch"
