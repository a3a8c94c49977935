"""Issuer diversity: no single issuer carries more than a share ``c`` of a dimension's weight.

Within one cell (an agent's dimension) let X be the weight of first-party evidence (no issuer, or an
exempt issuer) and W_1..W_k the weight each other issuer brings. The cap replaces every W_j by
min(W_j, L), with L the largest level such that L <= c * (X + sum_j min(W_j, L)) (water-filling): after
capping, no issuer holds more than c of the cell's weight, and issuers below the level are untouched.
With no first-party evidence and fewer than 1/c issuers, L is 0: a lone counterparty, or a ring of
them, carries nothing. See ``docs/methodology.md``.
"""

from __future__ import annotations

import numpy as np

from trustscore.scoring.kernels import (
    F64,
    I64,
    ascending_order,
    ascending_sums,
    dense_codes,
    exclusive_prefix_sums,
    group_starts,
)

#: Relative margin of the quick "no cap needed" test: an ordered sum of k terms >= 0 is within k·2⁻⁵³ of
#: the exact sum, so with fewer than 10⁹ items a cell the quick and the exact test cannot disagree.
_MARGIN = 1e-6

#: Below this the quick test's margin is not trusted (floats near 2^-1022 lose relative precision).
_NORMAL_FLOOR = 2.0**-1000


def issuer_cap_factors(cell: I64, issuer: I64, weight: F64, cells: int, max_share: float) -> F64:
    """Per-row multiplier in [0, 1] that caps each issuer's share of its cell; ``issuer`` -1 is exempt."""
    factors = np.ones(weight.size)
    # Row indexes, not a mask: numpy gathers and scatters by a boolean mask of random rows several times
    # slower than by the indexes of its set rows.
    capped = np.flatnonzero(issuer >= 0)
    if capped.size == 0:
        return factors
    # One group per (cell, issuer) in order of (cell, issuer), dense ids 0..pairs-1.
    width = int(issuer.max()) + 1
    pair_key = cell[capped]
    pair_key *= width
    pair_key += issuer[capped]
    group, pairs = dense_codes(pair_key)
    pair_cell = pairs // width

    # Each issuer's weight in its cell and the first-party weight X of each cell, in one pass of sums:
    # capped rows sum into their pair, the others into pairs.size + their cell. Taken in any order first.
    sum_group = cell + pairs.size
    sum_group[capped] = group
    rough = np.bincount(sum_group, weights=weight, minlength=pairs.size + cells)

    # Most cells need no cap: their heaviest issuer holds at most c of their total, both taken in any
    # order, with a margin (1e-6) far above those sums' rounding errors, so the exact test below would say
    # the same. Only the other cells' issuers go through the water-filling, which works cell by cell and
    # reads their sums taken in ascending order, the only ones the methodology knows.
    runs = group_starts(pair_cell)  # pairs are numbered in order of (cell, issuer)
    heaviest_of = np.zeros(cells)
    heaviest_of[pair_cell[runs]] = np.maximum.reduceat(rough[: pairs.size], runs)
    any_order_total = rough[pairs.size :] + np.bincount(
        pair_cell, weights=rough[: pairs.size], minlength=cells
    )
    bound = max_share * any_order_total * (1.0 - _MARGIN)
    # The margin holds for normal floats only: where c·T is subnormal (a custom tiny max_share, weights
    # near 2^-1022) or an any-order sum overflowed, the cell goes to the exact test.
    trusted = np.isfinite(bound) & (bound >= _NORMAL_FLOOR)
    maybe = ~trusted | (heaviest_of > bound)
    candidates = np.flatnonzero(maybe[pair_cell])
    if candidates.size == 0:
        return factors
    rows = np.flatnonzero(maybe[cell])
    sums = ascending_sums(sum_group[rows], weight[rows], pairs.size + cells)
    issuer_weight, exempt = sums[: pairs.size], sums[pairs.size :]

    # Issuers of each cell in ascending order of weight; ranks i = 1..k within a cell.
    order = candidates[ascending_order(pair_cell[candidates], issuer_weight[candidates])]
    w, c_of = issuer_weight[order], pair_cell[order]
    change = np.flatnonzero(c_of[1:] != c_of[:-1]) + 1
    starts = np.concatenate(([0], change)).astype(np.int64)
    count = np.diff(np.concatenate((starts, [w.size])))
    below = exclusive_prefix_sums(w, starts)  # P_i: weight of the issuers lighter than rank i
    rank = np.arange(w.size) - np.repeat(starts, count)
    above = np.repeat(count, count) - rank  # m_i: issuers at rank i or heavier
    floor = np.where(rank > 0, np.concatenate(([0.0], w[:-1])), 0.0)  # W_(i-1), the piece's lower end
    x = exempt[c_of]
    heaviest = w[np.repeat(starts + count - 1, count)]
    cell_total = x + below[np.repeat(starts + count - 1, count)] + heaviest
    needs_cap = heaviest > max_share * cell_total

    # g(L) = c * T(L) - L is concave; the largest root lies in the last piece where g(lower end) >= 0.
    g_floor = max_share * (x + below + floor * above) - floor
    ok = g_floor >= 0.0
    last_ok = np.maximum.reduceat(np.where(ok, rank, -1), starts)
    pick = starts + np.maximum(last_ok, 0)
    slope_gap = 1.0 - max_share * above[pick]
    level = np.where(
        slope_gap > 0.0,
        max_share * (x[pick] + below[pick]) / np.where(slope_gap > 0.0, slope_gap, 1.0),
        w[pick],
    )
    level = np.clip(level, floor[pick], w[pick])
    level_of = np.repeat(level, count)
    capped_weight = np.minimum(w, level_of)
    factor_sorted = np.where(needs_cap & (w > 0.0), capped_weight / np.where(w > 0.0, w, 1.0), 1.0)

    factor_of_group = np.ones(pairs.size)
    factor_of_group[order] = factor_sorted
    factors[capped] = factor_of_group[group]
    return factors
