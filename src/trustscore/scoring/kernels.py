"""Deterministic vectorised reductions the engine is built from.

Floating-point addition is not associative, so every sum over a group of terms is taken in one public
order: the terms in ascending order, added left to right starting from 0.0 (``docs/methodology.md``,
"Arithmetic"). A group's sum then depends only on the multiset of its terms, never on input order or on
other groups. ``numpy.bincount`` accumulates sequentially in array order, so sorting first is enough.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from fractions import Fraction

import numpy as np
from numpy.typing import NDArray

I64 = NDArray[np.int64]
F64 = NDArray[np.float64]


def ascending_order(group: I64, x: F64) -> I64:
    """Permutation sorting rows by ``group`` (>= 0), then by ``x`` (ascending); ``x`` must be >= 0 and
    finite. Equal rows come in any order."""
    return _group_value_order(group, (x + 0.0).view(np.int64))[0]


def ascending_sums(group: I64, x: F64, groups: int) -> F64:
    """Per-group sums of ``x`` (>= 0), each taken in ascending order of its terms.

    Zero terms are left out when they are most of the rows: in ascending order they come first and
    0.0 + 0.0 is 0.0, so they change no sum (a failed item's w·v is 0). Leaving them out costs a pass
    and two gathers, about what sorting half the rows costs (numpy's int64 sort is fast where it is
    vectorised), so below half they stay in.
    """
    zeros = group.size - np.count_nonzero(x)
    if zeros * 2 > group.size:
        kept = np.flatnonzero(x)
        group, x = group[kept], x[kept]
        x += 0.0  # a copy of ours: + 0.0 in place turns -0.0 into 0.0
    else:
        x = x + 0.0
    if group.size == 0:
        return np.zeros(groups)
    bits = x.view(np.int64)  # non-negative float bits sort as ints
    _, sorted_group, sorted_bits = _group_value_order(group, bits)
    sums = np.bincount(sorted_group, weights=sorted_bits.view(np.float64), minlength=groups)
    return sums.astype(np.float64, copy=False)


def _group_value_order(group: I64, bits: I64) -> tuple[I64, I64, I64]:
    """The permutation sorting rows by (group, bits), and group and bits in that order.

    Fast path: one in-place ``sort`` of an int64 packing (group, top bits of the value, row index),
    several times faster than ``argsort`` and the group needs no gather. The rare runs whose values
    agree in the packed top bits but not below are re-sorted exactly.
    """
    n = group.size
    if n == 0:
        empty = np.zeros(0, dtype=np.int64)
        return empty, empty, empty
    index_bits = max(1, (n - 1).bit_length())
    group_bits = max(1, int(group.max()).bit_length())
    value_bits = 63 - group_bits - index_bits
    if value_bits < 12:  # not even sign and exponent fit: sort exactly the slow way
        order = np.lexsort((bits, group)).astype(np.int64, copy=False)
        return order, group[order], bits[order]
    # The value's offset from the smallest, its top value_bits: order-preserving, and exact (no run to
    # re-sort) when the values span few bits, e.g. one binade.
    low = int(bits.min())
    shift = max(0, (int(bits.max()) - low).bit_length() - value_bits)
    # Two new arrays and one more for the order: a new array's pages cost more than a pass over them
    # (the kernel faults them in and zeroes them), so the shifted group's buffer is reused for the
    # shifted value and then for the sorted bits, and the packing becomes the sorted groups.
    packed = np.arange(n, dtype=np.int64)
    value = group << (63 - group_bits)
    packed |= value
    np.subtract(bits, low, out=value)
    value >>= shift
    value <<= index_bits
    packed |= value
    packed.sort()
    order = packed & ((1 << index_bits) - 1)
    sorted_bits = np.take(bits, order, out=value, mode="clip")  # every index is in range: no clipping
    if shift > 0:
        # A run to re-sort is a descent of the exact values between rows of equal (group, top bits):
        # look for descents first (few: mostly group boundaries), then compare heads only there.
        fall = np.flatnonzero(sorted_bits[1:] < sorted_bits[:-1])
        heads = packed[fall] >> index_bits
        heads = heads[heads == packed[fall + 1] >> index_bits]
        if heads.size:
            heads = heads[np.concatenate(([True], heads[1:] != heads[:-1]))]  # sorted: drop repeats
            starts = np.searchsorted(packed, heads << index_bits, side="left")
            ends = np.searchsorted(packed, (heads << index_bits) | ((1 << index_bits) - 1), side="right")
            length = ends - starts
            rows = np.repeat(starts - np.cumsum(length) + length, length) + np.arange(int(length.sum()))
            fix = np.lexsort((sorted_bits[rows], np.repeat(np.arange(heads.size), length)))
            order[rows] = order[rows][fix]
            sorted_bits[rows] = sorted_bits[rows][fix]
    packed >>= 63 - group_bits
    return order, packed, sorted_bits


def sums_near_order(group: I64, x: F64, groups: int, order: I64) -> F64:
    """Per-group ascending sums of ``x`` (>= 0) given an ``order`` that sorts the rows by ``group`` and
    most groups' terms ascending already (e.g. the order of the same weights at another time, all of a
    group scaled by one factor): the groups it leaves out of order are re-sorted exactly, the others
    cost no sort."""
    if group.size == 0:
        return np.zeros(groups)
    sorted_group = group[order]
    terms = x[order] + 0.0  # + 0.0 turns -0.0 into 0.0
    fall = np.flatnonzero((terms[1:] < terms[:-1]) & (sorted_group[1:] == sorted_group[:-1]))
    if fall.size:
        bad = np.unique(sorted_group[fall])
        starts = np.searchsorted(sorted_group, bad, side="left")
        length = np.searchsorted(sorted_group, bad, side="right") - starts
        rows = np.repeat(starts - np.cumsum(length) + length, length) + np.arange(int(length.sum()))
        terms[rows] = terms[rows][np.lexsort((terms[rows], sorted_group[rows]))]
    return np.bincount(sorted_group, weights=terms, minlength=groups).astype(np.float64, copy=False)


def sums_in_order(group: I64, x: F64, groups: int, order: I64) -> F64:
    """Per-group sums of ``x`` added left to right in the row order ``order``.

    ``numpy.bincount`` accumulates in array order and a group's sum depends only on the order of its own
    terms, so any ``order`` that sorts ``x`` ascending (e.g. :func:`table_order`) gives
    every group its ascending sum, for every grouping at once: one order serves several sums of ``x``.
    """
    if group.size == 0:
        return np.zeros(groups)
    terms = x[order] + 0.0  # + 0.0 turns -0.0 into 0.0
    return np.bincount(group[order], weights=terms, minlength=groups).astype(np.float64, copy=False)


def table_order(code: I64, table: F64) -> I64:
    """A permutation sorting rows by ``table[code]`` ascending: a linear-time radix sort of the rank of
    each row's table entry (``table`` is small, e.g. one weight per source)."""
    rank = np.empty(table.size, dtype=np.int64)
    rank[np.argsort(table, kind="stable")] = np.arange(table.size, dtype=np.int64)
    small = np.int8 if table.size <= 127 else np.int16 if table.size <= 32767 else np.int64
    return np.argsort(rank.astype(small)[code], kind="stable").astype(np.int64, copy=False)


def key_order(key: I64) -> I64:
    """A permutation sorting the non-negative int64 ``key`` ascending; equal keys in any order.

    Where the key leaves room for a row index beside it, one in-place ``sort`` of (key, index) packed in
    an int64, several times faster than ``argsort``.
    """
    n = key.size
    bits = max(1, (n - 1).bit_length())
    if n == 0 or int(key.max()) >= (1 << (63 - bits)):
        return np.argsort(key).astype(np.int64, copy=False)
    packed = (key << bits) | np.arange(n, dtype=np.int64)
    packed.sort()
    packed &= (1 << bits) - 1
    return packed


def dense_codes(key: I64) -> tuple[I64, I64]:
    """Number the distinct values of ``key`` 0..k-1 in ascending order: (the code of each row, the
    distinct values), like ``numpy.unique(key, return_inverse=True)`` reversed, faster.

    Where the key is non-negative and leaves room for a row index beside it, the sorted packing gives
    both the order and the sorted keys (no gather of the keys), and buffers are reused
    (:func:`_group_value_order`)."""
    n = key.size
    bits = max(1, (n - 1).bit_length())
    low, high = (int(key.min()), int(key.max())) if n else (0, 0)
    if low < 0:  # key_order and the packing take non-negative keys only
        order = np.argsort(key).astype(np.int64, copy=False)
        sorted_key = key[order]
    elif n == 0 or high >= (1 << (63 - bits)):  # no room for a row index beside the key
        order = key_order(key)
        sorted_key = key[order]
    else:
        order = np.arange(n, dtype=np.int64)
        sorted_key = key << bits
        order |= sorted_key
        order.sort()
        np.right_shift(order, bits, out=sorted_key)
        order &= (1 << bits) - 1
    first = np.ones(n, dtype=np.bool_)
    np.not_equal(sorted_key[1:], sorted_key[:-1], out=first[1:])
    rank = np.cumsum(first, dtype=np.int64)
    rank -= 1
    codes = np.empty(n, dtype=np.int64)
    codes[order] = rank
    return codes, sorted_key[np.flatnonzero(first)]  # indexes: faster than a boolean mask


#: A value this little below a half-integer is that half-integer: float noise, not a real difference.
#: Sums of ascending terms err by < 1e-10 on 0..1000 even with 10**5 items a dimension
#: (``docs/methodology.md``, "Arithmetic").
HALF_UP_TOLERANCE = 1e-9
_HALF = 0.5 + HALF_UP_TOLERANCE


def powers_of_half(y: F64) -> F64:
    """``0.5 ** y`` element by element, by the C library's ``pow`` (Python's float ``**``, as the
    plain-Python reference computes it), in ``y``'s shape; inf where it overflows, as numpy's.

    Not numpy's ``power``: its AVX-512 code gives another last bit than ``pow`` for about 1 argument in
    20, so a number rounded from it (``adjusted``, a medal's freshness) depended on numpy's vector width
    and on NPY_DISABLE_CPU_FEATURES (``docs/methodology.md``, "Powers"; glibc's ``pow`` still has an FMA
    and a non-FMA variant that differ far more rarely). One call per element, ~1.2 µs: a rounded product
    of many is :func:`rounded_powers_of_half`."""
    values = y.ravel().tolist()
    try:
        out = np.fromiter(map(_half_pow, values), dtype=np.float64, count=len(values))
    except OverflowError:  # 0.5 ** y for y below about -1024
        out = np.array([_half_pow_or_inf(v) for v in values], dtype=np.float64)
    return out.reshape(y.shape)


#: numpy's ``power`` and the C library's ``pow`` both return 0.5^y within an ulp or two (2.2e-16
#: relative): a product of the factor moves by far less than this window (relative, absolute below 1)
#: when its last bits do.
POW_WINDOW = 1e-9


def rounded_powers_of_half(y: F64, scale: F64, rounding: Callable[[F64], F64]) -> F64:
    """``rounding(scale · 0.5^y)`` with 0.5^y the C library's ``pow`` (:func:`powers_of_half`), at
    numpy's speed; ``y`` and ``scale`` one-dimensional, of one length. The product with numpy's ``power``
    first, rounded at both ends of a window of :data:`POW_WINDOW` around it: ``rounding`` is monotone,
    so where both ends give the same bits any last bit of the factor rounds the same; only the rest is
    computed again by ``pow`` (NaN, inf, a product next to a rounding boundary, or within the window of
    0, where the ends are -0.0 and 0.0): none of 10^6 random ``adjusted`` products, ~1.4e-3 of the
    medals' (scale 10^6). 10^6 products: ~20 ms, against 120 ms by ``pow`` alone."""
    if y.ndim != 1 or scale.shape != y.shape:
        raise ValueError(f"y and scale must be one-dimensional and alike, not {y.shape} and {scale.shape}")
    x = scale * np.power(0.5, y)  # numpy's floating-point errors as before: power and product
    with np.errstate(invalid="ignore", over="ignore"):  # the window's own: such elements are edges
        window = POW_WINDOW * np.maximum(1.0, np.abs(x))
        out = rounding(x - window)
        high = rounding(x + window)
    edge = np.flatnonzero((out.view(np.int64) != high.view(np.int64)) | np.isnan(out))
    if edge.size:
        out[edge] = rounding(scale[edge] * powers_of_half(y[edge]))
    return out


def _half_pow(y: float) -> float:
    return math.pow(0.5, y)


def _half_pow_or_inf(y: float) -> float:
    try:
        return math.pow(0.5, y)
    except OverflowError:
        return math.inf


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
    small = np.int16 if int(run_length.max()) <= 32767 else np.int64
    by_rank = np.argsort(rank.astype(small), kind="stable")  # radix sort on 16-bit keys
    bounds = np.searchsorted(rank[by_rank], np.arange(1, int(run_length.max()) + 1))
    for r in range(1, int(run_length.max())):
        rows = by_rank[bounds[r - 1] : bounds[r]]
        out[rows] = out[rows - 1] + values[rows - 1]
    return out
