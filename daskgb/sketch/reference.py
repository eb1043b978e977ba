"""The sketch's hot loops in array steps (the oracles of sketch/cuda.py; the CPU path): a dense
block's summaries, and a segmented binary search."""

from __future__ import annotations

from .summary import block_entries, exact_summary, prune_with


def summarize_dense(xp, block, missing: float, budget):
    """Per-column summaries of a dense (rows, k) block, unweighted: each column's present
    entries (neither NaN nor `missing`) folded into its exact summary, pruned to `budget`
    where it holds more entries (None: never): summary.py's exact summary of the block's
    (column, value) pairs, pruned with this module's segmented search."""
    feature, values = block_entries(xp, block)
    s = exact_summary(xp, feature, values, None, block.shape[1], missing)
    return s if budget is None else prune_with(s, budget, segmented_searchsorted)


def segmented_searchsorted(xp, a, lo, hi, v, max_width: int, right: bool):
    """searchsorted of each v[q] in a[lo[q]:hi[q]] (each slice sorted), as an index into a, in
    module xp: a lock-step binary search over all queries, one pass per bit of the widest
    slice, so the cost is a few array operations per bit whatever the number of segments,
    and the comparisons are exact (no offset keys for float64 ranks)."""
    lo = lo.astype(xp.int64, copy=True)
    hi = hi.astype(xp.int64, copy=True)
    last = max(a.size - 1, 0)
    for _ in range(int(max_width).bit_length()):
        active = lo < hi
        mid = (lo + hi) >> 1
        am = a[xp.minimum(mid, last)]
        go = (am <= v) if right else (am < v)
        lo = xp.where(active & go, mid + 1, lo)
        hi = xp.where(active & ~go, mid, hi)
    return lo
