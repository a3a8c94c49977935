"""Deterministic vectorised reductions the engine is built from.

Floating-point addition is not associative, so every sum over a group of terms is taken in one public
order: the terms in ascending order, added left to right starting from 0.0 (``docs/methodology.md``,
"Arithmetic"). A group's sum then depends only on the multiset of its terms, never on input order or on
other groups. ``numpy.bincount`` accumulates sequentially in array order, so sorting first is enough.
"""

from __future__ import annotations

from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

I64 = NDArray[np.int64]
F64 = NDArray[np.float64]

_GROUP_BITS = 23  # groups that fit beside the top 40 bits of a non-negative float64
_VALUE_SHIFT = 23  # non-negative float64 bits are < 2**63, so 40 bits remain


def ascending_order(group: I64, x: F64) -> I64:
    """Permutation sorting rows by ``group``, then by ``x`` (ascending); ``x`` must be >= 0 and finite.

    Fast path: one non-stable argsort of a composite int64 (group, top 40 bits of x); the rare runs whose
    values agree in those bits but not below are re-sorted exactly.
    """
    bits = (x + 0.0).view(np.int64)  # + 0.0 turns -0.0 into 0.0; non-negative float bits sort as ints
    if group.size == 0 or int(group.max()) >= (1 << _GROUP_BITS):
        return np.lexsort((bits, group)).astype(np.int64, copy=False)
    composite = (group << (63 - _GROUP_BITS)) | (bits >> _VALUE_SHIFT)
    order = np.argsort(composite).astype(np.int64, copy=False)
    sorted_comp, sorted_bits = composite[order], bits[order]
    same = sorted_comp[1:] == sorted_comp[:-1]
    descent = same & (sorted_bits[1:] < sorted_bits[:-1])
    if descent.any():
        run = np.concatenate(([0], np.cumsum(~same)))
        rows = np.flatnonzero(np.isin(run, run[1:][descent]))
        fix = np.lexsort((sorted_bits[rows], sorted_comp[rows]))
        order[rows] = order[rows][fix]
    return order


def ascending_sums(group: I64, x: F64, groups: int) -> F64:
    """Per-group sums of ``x`` (>= 0), each taken in ascending order of its terms."""
    if group.size == 0:
        return np.zeros(groups)
    x = x + 0.0
    order = ascending_order(group, x)
    return np.bincount(group[order], weights=x[order], minlength=groups).astype(np.float64, copy=False)


#: A value this little below a half-integer is that half-integer: float noise, not a real difference.
#: Sums of ascending terms err by < 1e-10 on 0..1000 even with 10**5 items a dimension
#: (``docs/methodology.md``, "Arithmetic").
HALF_UP_TOLERANCE = 1e-9
_HALF = 0.5 + HALF_UP_TOLERANCE


def round_half_up(x: F64) -> F64:
    """floor(x + 0.5 + 1e-9): .5 always rounds up (not to even), also when float noise put x just below
    it (an exact 38.5 computed as 38.49999999999999 rounds to 39)."""
    return np.floor(x + _HALF)


def decimal_sums(present: NDArray[np.bool_], weights: tuple[float, ...]) -> F64:
    """Per row, the sum of ``weights[d]`` over the columns ``d`` present, taken exactly on the decimals
    the weights are written as (their shortest repr) and rounded once to float64: 0.2 + 0.1 is 0.3, not
    0.30000000000000004, whatever the order or the set."""
    exact = [Fraction(repr(w)) for w in weights]
    if present.shape[1] <= 62:
        mask = present.astype(np.int64) @ (np.int64(1) << np.arange(present.shape[1], dtype=np.int64))
        sets, which = np.unique(mask, return_inverse=True)
        members = ((int(m) >> d) & 1 for m in sets.tolist() for d in range(len(exact)))
        flags = np.fromiter(members, dtype=np.bool_, count=sets.size * len(exact)).reshape(-1, len(exact))
    else:
        flags, which = np.unique(present, axis=0, return_inverse=True)
    values = np.array(
        [float(sum(e for e, on in zip(exact, row, strict=True) if on)) for row in flags.tolist()]
    )
    return values.reshape(-1)[which.reshape(-1)] if values.size else np.zeros(present.shape[0])


def group_starts(sorted_group: I64) -> I64:
    """Index of the first row of each run of equal values in an already sorted array."""
    if sorted_group.size == 0:
        return np.zeros(0, dtype=np.int64)
    change = np.flatnonzero(sorted_group[1:] != sorted_group[:-1]) + 1
    return np.concatenate(([0], change)).astype(np.int64)


def exclusive_prefix_sums(values: F64, starts: I64) -> F64:
    """Within each run (starting at ``starts``), the sum of the values before each row, left to right.

    Computed rank by rank so each run's sums never touch another run's values.
    """
    n = values.size
    out = np.zeros(n)
    if n == 0:
        return out
    run_length = np.diff(np.concatenate((starts, [n])))
    rank = np.arange(n) - np.repeat(starts, run_length)
    by_rank = np.argsort(rank, kind="stable")
    bounds = np.searchsorted(rank[by_rank], np.arange(1, int(run_length.max()) + 1))
    for r in range(1, int(run_length.max())):
        rows = by_rank[bounds[r - 1] : bounds[r]]
        out[rows] = out[rows - 1] + values[rows - 1]
    return out
