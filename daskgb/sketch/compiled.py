"""The sketch's dense summaries compiled for CPUs (cpu/): reference.summarize_dense's summaries, bit for bit.

The oracle sorts every (column, value) key of a block at once (uint64 keys, one sort of
rows x columns). Here each column's present values are gathered, sorted as float32 by numpy
(which lets go of the GIL: the threads sort columns side by side) and folded into
(value, count) runs by a compiled loop. Unweighted counts are integers, so the ranks are
exactly the oracle's; equal values -0.0 and 0.0 are one entry, 0.0, as the oracle's keys make them.
"""

from __future__ import annotations

import numpy as np

from .. import cpu
from .summary import Summary, _empty_summary, check_prune_budget


def _present(col, missing, is_nan_missing, out):
    """The column's values that are neither NaN nor `missing`, in out: their count."""
    n = 0
    for i in range(col.shape[0]):
        v = col[i]
        if v != v or (not is_nan_missing and v == missing):
            continue
        out[n] = v
        n += 1
    return n


def _runs(sorted_values, values, counts):
    """Distinct values of a sorted column (-0.0 as 0.0) and how often each occurs: their count."""
    m = 0
    n = sorted_values.shape[0]
    i = 0
    while i < n:
        v = sorted_values[i]
        j = i + 1
        while j < n and sorted_values[j] == v:
            j += 1
        values[m] = v + np.float32(0.0)
        counts[m] = j - i
        m += 1
        i = j
    return m


def _prune_marks(ptrs, rmin, rmax, wmin, budget, keep):
    """summary.prune_with's choice of entries, feature by feature: keep[i] where entry i stays.
    The same queries in the same arithmetic; the search is a plain binary search of each
    feature's increasing rmin + rmax."""
    n_queries = budget - 2
    for f in range(ptrs.shape[0] - 1):
        base = ptrs[f]
        m = ptrs[f + 1] - base
        if m <= budget:
            for i in range(base, base + m):
                keep[i] = True
            continue
        keep[base] = True
        keep[base + m - 1] = True
        begin = rmax[base]
        span = rmin[base + m - 1] - begin
        for q in range(1, n_queries + 1):
            dx2 = 2.0 * ((np.float64(q) * span) / (budget - 1) + begin)
            lo = base + 2
            hi = base + m
            while lo < hi:  # the first j in [base + 2, base + m) with rmin + rmax > dx2
                mid = (lo + hi) >> 1
                if rmin[mid] + rmax[mid] <= dx2:
                    lo = mid + 1
                else:
                    hi = mid
            i = lo - 1
            if i < base + m - 1:
                ic = min(i, base + m - 2)
                take_next = dx2 >= (rmin[ic] + wmin[ic]) + (rmax[ic + 1] - wmin[ic + 1])
                keep[ic + 1 if take_next else ic] = True
            else:
                keep[base] = True


_compiled = {}


def _kernels():
    if not _compiled:
        _compiled.update(present=cpu.jit(_present), runs=cpu.jit(_runs), prune=cpu.jit(_prune_marks))
    return _compiled


def summarize_dense(block, missing: float, budget):
    """Per-column summaries of a dense (rows, k) block, unweighted: reference.summarize_dense's.
    Each column is summarised and pruned on its own (a thread's), then the columns joined."""
    k = _kernels()
    n_rows, n_cols = block.shape
    parts: list = [None] * n_cols
    is_nan_missing = bool(np.isnan(missing))
    missing32 = np.float32(0.0 if is_nan_missing else missing)
    budget = None if budget is None else check_prune_budget(budget)

    def columns(lo, hi):
        buf = np.empty(n_rows, dtype=np.float32)
        for c in range(lo, hi):
            v = buf[: k["present"](np.ascontiguousarray(block[:, c], dtype=np.float32), missing32, is_nan_missing,
                                   buf)]
            v.sort()
            values = np.empty(v.size, dtype=np.float32)
            counts = np.empty(v.size, dtype=np.int64)
            m = k["runs"](v, values, counts)
            wmin = counts[:m].astype(np.float64)
            rmin = np.cumsum(wmin) - wmin  # counts: exact integers, whatever the order of adds
            s = Summary(np.array([0, m], dtype=np.int64), values[:m], rmin, rmin + wmin, wmin)
            if budget is not None and m > budget:
                s = prune(s, budget)
            parts[c] = (s, v.size > 0 and bool(np.isinf(v[0]) or np.isinf(v[-1])))

    cpu.run_chunks(columns, n_cols)
    if any(p[1] for p in parts):
        raise ValueError("input contains inf; use missing=inf to treat it as missing")
    sizes = np.array([p[0].value.size for p in parts], dtype=np.int64)
    if not sizes.sum():
        return _empty_summary(np, n_cols)
    ptrs = np.zeros(n_cols + 1, dtype=np.int64)
    np.cumsum(sizes, out=ptrs[1:])
    return Summary(ptrs, *(np.concatenate([getattr(p[0], name) for p in parts])
                           for name in ("value", "rmin", "rmax", "wmin")))


def prune(s: Summary, budget: int) -> Summary:
    """summary.prune_with's summary (at most `budget` entries a feature), by one compiled pass."""
    budget = check_prune_budget(budget)
    if not (np.diff(s.ptrs) > budget).any():
        return s
    keep = np.zeros(s.value.size, dtype=np.bool_)
    _kernels()["prune"](s.ptrs, s.rmin, s.rmax, s.wmin, budget, keep)
    cum = np.zeros(keep.size + 1, dtype=np.int64)
    np.cumsum(keep, out=cum[1:])
    return Summary(cum[s.ptrs], s.value[keep], s.rmin[keep], s.rmax[keep], s.wmin[keep])
