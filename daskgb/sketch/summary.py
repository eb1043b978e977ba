"""Weighted quantile summaries: the Summary container, exact summaries of entries, and prune.

The parts of the sketch both backends' hot loops build on (sketch/reference.py's array
steps and sketch/cuda.py's kernels) and sketch/__init__.py's merge and cuts: nothing here
picks a backend, so every one of them can import it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..arrays import array_module, to_host
from .cuts import _as_xp

_SIGN32 = 0x80000000


@dataclass
class Summary:
    """Weighted quantile summaries of all features, stored flat: feature f owns entries ptrs[f]:ptrs[f+1]."""

    ptrs: np.ndarray  # (n_features + 1,) int64, always on the host: sizes drive the host-side loop bounds
    value: Any  # float32, strictly increasing within each feature
    rmin: Any  # float64: rank lower bound (total weight of entries < value)
    rmax: Any  # float64: rank upper bound (total weight of entries <= value)
    wmin: Any  # float64: weight of entries equal to value

    @property
    def n_features(self) -> int:
        return len(self.ptrs) - 1

    def to(self, xp) -> "Summary":
        """The same summary with its arrays in module xp (numpy or cupy)."""
        return Summary(
            self.ptrs, _as_xp(xp, self.value), _as_xp(xp, self.rmin), _as_xp(xp, self.rmax), _as_xp(xp, self.wmin)
        )


def _value_key(xp, values):
    """uint32 keys ordered as the float32 values (NaN-free), with -0.0 and 0.0 one key.

    Flipping the sign bit of non-negatives and all bits of negatives makes the IEEE
    bit pattern sort as the number; with the feature in the high 32 bits a single
    uint64 sort or searchsorted orders (feature, value) exactly.
    """
    v = values.astype(xp.float32, copy=False) + xp.float32(0.0)  # -0.0 + 0.0 == +0.0
    bits = v.view(xp.uint32)
    return xp.where(bits >= xp.uint32(_SIGN32), ~bits, bits | xp.uint32(_SIGN32))


def _value_from_key(xp, key32):
    key32 = key32.astype(xp.uint32)
    bits = xp.where(key32 >= xp.uint32(_SIGN32), key32 ^ xp.uint32(_SIGN32), ~key32)
    return bits.view(xp.float32)


def _feature_value_key(xp, feature, values):
    return (feature.astype(xp.uint64) << xp.uint64(32)) | _value_key(xp, values).astype(xp.uint64)


def _entry_features(xp, ptrs_dev, n):
    """Feature of every flat entry (int64), found on the device from the pointers."""
    return xp.searchsorted(ptrs_dev, xp.arange(n, dtype=xp.int64), side="right") - 1


def _empty_summary(xp, n_features: int) -> Summary:
    return Summary(
        np.zeros(n_features + 1, dtype=np.int64),
        xp.empty(0, dtype=xp.float32),
        xp.empty(0, dtype=xp.float64),
        xp.empty(0, dtype=xp.float64),
        xp.empty(0, dtype=xp.float64),
    )


def block_entries(xp, block):
    """A dense (rows, k) block as (column, value) entries, column-major (a column's values
    together, as the sort wants them): int64 columns, float32 values."""
    rows, k = block.shape
    values = xp.ascontiguousarray(block.T, dtype=xp.float32).ravel()
    return xp.repeat(xp.arange(k, dtype=xp.int64), rows), values


def exact_summary(xp, feature, values, weights, n_features: int, missing: float) -> Summary:
    """Exact summaries of (feature, value, weight) triples (prune_with() them to a budget)."""
    valid = ~xp.isnan(values)
    if not math.isnan(missing):
        valid &= values != xp.float32(missing)
    if weights is not None:
        # XGBoost's sketch drops zero-weight entries on push: such a value is no candidate cut.
        valid &= weights > 0
    values = values[valid]
    feature = feature[valid]
    if values.size == 0:
        return _empty_summary(xp, n_features)
    if bool(xp.isinf(values).any()):
        raise ValueError("input contains inf; use missing=inf to treat it as missing")

    key = _feature_value_key(xp, feature, values)
    if weights is None:
        key = xp.sort(key)
    else:
        order = xp.argsort(key)
        key = key[order]
        weights = weights[valid][order]
    n = key.size
    is_start = xp.empty(n, dtype=bool)
    is_start[0] = True
    is_start[1:] = key[1:] != key[:-1]
    starts = xp.flatnonzero(is_start)
    # before[i]: total weight of the sorted entries before entry i. float64 where XGBoost's
    # CPU sketch sums in float32: sums of float32 weights stay exact far longer.
    before = xp.empty(n + 1, dtype=xp.float64)
    before[0] = 0.0
    if weights is None:
        before[1:] = xp.arange(1, n + 1, dtype=xp.float64)
    else:
        xp.cumsum(weights, dtype=xp.float64, out=before[1:])
    ends = xp.empty_like(starts)
    ends[:-1] = starts[1:]
    ends[-1] = n

    entry_feature = (key[starts] >> xp.uint64(32)).astype(xp.int64)
    counts = to_host(xp.bincount(entry_feature, minlength=n_features))
    ptrs = np.zeros(n_features + 1, dtype=np.int64)
    np.cumsum(counts, out=ptrs[1:])
    # Ranks restart at 0 in every feature: subtract the weight before the feature's first entry.
    first_start = starts[xp.asarray(ptrs[:-1])[entry_feature]]
    rmin = before[starts] - before[first_start]
    wmin = before[ends] - before[starts]
    return Summary(ptrs, _value_from_key(xp, key[starts] & xp.uint64(0xFFFFFFFF)), rmin, rmin + wmin, wmin)


def check_prune_budget(budget) -> int:
    """The budget of a prune as an int, refused below 2 (a pruned feature keeps its first and last entries)."""
    budget = int(budget)
    if budget < 2:
        raise ValueError(f"a pruned summary keeps first and last entries: budget must be >= 2, got {budget}")
    return budget


def prune_with(s: Summary, budget: int, search) -> Summary:
    """Keep at most `budget` entries per feature (paper's Algorithm 4; XGBoost's SetPrune).

    First and last entries stay; query k (1 <= k <= budget-2) aims at rank
    d = k * (last.rmin - first.rmax) / (budget-1) + first.rmax and keeps entry i or i+1,
    where i is the last entry with rmin + rmax <= 2d, whichever is nearer. Repeats are
    kept once. Features with <= budget entries are returned unchanged. search(xp, a, lo, hi,
    v, max_width, right) is the segmented binary search the queries run (the backend's).
    The array steps, and the reference of sketch/cuda.py's prune, which sketch.prune runs on
    device summaries.
    """
    budget = check_prune_budget(budget)
    counts = np.diff(s.ptrs)
    big = np.flatnonzero(counts > budget)
    if big.size == 0:
        return s
    xp = array_module(s.value)
    n = s.value.size
    ptrs_dev = xp.asarray(s.ptrs)
    small = xp.asarray(counts <= budget)
    keep = small[_entry_features(xp, ptrs_dev, n)]
    base_h = s.ptrs[big]
    keep[xp.asarray(base_h)] = True
    keep[xp.asarray(base_h + counts[big] - 1)] = True

    n_queries = budget - 2
    if n_queries > 0:
        base = xp.asarray(np.repeat(base_h, n_queries))
        m = xp.asarray(np.repeat(counts[big], n_queries))
        k = xp.asarray(np.tile(np.arange(1, n_queries + 1, dtype=np.float64), big.size))
        begin = s.rmax[base]
        span = s.rmin[base + m - 1] - begin
        # Same association as XGBoost, so that equal inputs give equal choices.
        dx2 = 2.0 * ((k * span) / (budget - 1) + begin)
        twice_mid = s.rmin + s.rmax
        # i = 1 + #{2 <= j < m : rmin[j] + rmax[j] <= dx2}: where SetPrune's forward walk stops.
        j = search(xp, twice_mid, base + 2, base + m, dx2, int(counts[big].max()), right=True)
        i = j - 1
        inside = i < base + m - 1  # SetPrune stops once the walk reaches the last entry
        ic = xp.minimum(i, base + m - 2)
        take_next = dx2 >= (s.rmin[ic] + s.wmin[ic]) + (s.rmax[ic + 1] - s.wmin[ic + 1])
        keep[xp.where(inside, ic + take_next, base)] = True

    cum = xp.zeros(n + 1, dtype=xp.int64)
    xp.cumsum(keep, out=cum[1:])
    ptrs = to_host(cum[ptrs_dev]).astype(np.int64)
    return Summary(ptrs, s.value[keep], s.rmin[keep], s.rmax[keep], s.wmin[keep])


def fill_budget(s: Summary, pruned: Summary, budget: int) -> Summary:
    """`pruned` (a prune of `s` to `budget`; both numpy, every feature of `s` holding more than
    `budget` entries) with each feature's unused budget spread evenly over the entries the
    prune skipped: of a feature's c skipped entries, with u of its budget unused (u < c, since
    it holds more entries than the budget), the ((2t + 1) c) // (2u)-th for t = 0 .. u-1.

    The skipped entries are the light ones between the kept; a summary's entries are spaced
    about evenly in rank where no value is heavy, so spreading by count spreads by rank there.
    Entries are only added, so no gap between neighbours widens: the result's error is at most
    `pruned`'s. One pass of array steps.
    """
    counts = np.diff(s.ptrs)
    features = np.arange(counts.size, dtype=np.int64)
    feature = np.repeat(features, counts)
    keys = _feature_value_key(np, feature, s.value)
    kept = np.diff(pruned.ptrs)
    keep = np.zeros(s.value.size, dtype=bool)
    keep[np.searchsorted(keys, _feature_value_key(np, np.repeat(features, kept), pruned.value))] = True
    skipped = np.flatnonzero(~keep)  # ascending: each feature's together, in order
    n_skipped = counts - kept
    unused = np.minimum(budget - kept, n_skipped)
    first_skipped = np.cumsum(n_skipped) - n_skipped
    t = np.arange(int(unused.sum()), dtype=np.int64) - np.repeat(np.cumsum(unused) - unused, unused)
    c, u = np.repeat(n_skipped, unused), np.repeat(unused, unused)
    keep[skipped[np.repeat(first_skipped, unused) + ((2 * t + 1) * c) // (2 * u)]] = True
    ptrs = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(np.bincount(feature[keep], minlength=counts.size), out=ptrs[1:])
    return Summary(ptrs, s.value[keep], s.rmin[keep], s.rmax[keep], s.wmin[keep])
