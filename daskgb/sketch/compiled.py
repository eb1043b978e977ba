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


def _merge_feature(a_ptrs, a_value, a_rmin, a_rmax, a_wmin, b_ptrs, b_value, b_rmin, b_rmax, b_wmin, out_ptrs,
                   value, rmin, rmax, wmin, write):
    """Every feature's entries of a and b merged by value (sketch.merge's arithmetic): a value of
    both sides sums their entries (a's value kept); a value of one side adds the other side's
    bounds from its neighbours there. write=False: each feature's merged count, in out_ptrs[f + 1]."""
    for f in range(a_ptrs.shape[0] - 1):
        i, a_end = a_ptrs[f], a_ptrs[f + 1]
        j, b_end = b_ptrs[f], b_ptrs[f + 1]
        a_lo, b_lo = i, j
        o = out_ptrs[f] if write else 0
        while i < a_end or j < b_end:
            if j == b_end or (i < a_end and a_value[i] < b_value[j]):  # a's alone
                if write:
                    add_rmin = b_rmin[j - 1] + b_wmin[j - 1] if j > b_lo else 0.0
                    if j < b_end:
                        add_rmax = b_rmax[j] - b_wmin[j]
                    else:
                        add_rmax = b_rmax[b_end - 1] if b_end > b_lo else 0.0
                    value[o] = a_value[i]
                    rmin[o] = a_rmin[i] + add_rmin
                    rmax[o] = a_rmax[i] + add_rmax
                    wmin[o] = a_wmin[i] + 0.0
                i += 1
            elif i == a_end or b_value[j] < a_value[i]:  # b's alone
                if write:
                    add_rmin = a_rmin[i - 1] + a_wmin[i - 1] if i > a_lo else 0.0
                    if i < a_end:
                        add_rmax = a_rmax[i] - a_wmin[i]
                    else:
                        add_rmax = a_rmax[a_end - 1] if a_end > a_lo else 0.0
                    value[o] = b_value[j]
                    rmin[o] = b_rmin[j] + add_rmin
                    rmax[o] = b_rmax[j] + add_rmax
                    wmin[o] = b_wmin[j]
                j += 1
            else:  # both (-0.0 and 0.0 are one value, as the oracle's keys make them)
                if write:
                    value[o] = a_value[i]
                    rmin[o] = a_rmin[i] + b_rmin[j]
                    rmax[o] = a_rmax[i] + b_rmax[j]
                    wmin[o] = a_wmin[i] + b_wmin[j]
                i += 1
                j += 1
            o += 1
        if not write:
            out_ptrs[f + 1] = o


_compiled = {}


def _kernels():
    if not _compiled:
        _compiled.update(present=cpu.jit(_present), runs=cpu.jit(_runs), prune=cpu.jit(_prune_marks),
                         merge=cpu.jit(_merge_feature))
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


def merge(a: Summary, b: Summary) -> Summary:
    """sketch.merge's merged summary of two non-empty host summaries, before its _fix_error: a
    two-pointer walk of each feature's entries (the oracle searches each side in the other)."""
    k = _kernels()
    a_ptrs = np.asarray(a.ptrs, dtype=np.int64)
    b_ptrs = np.asarray(b.ptrs, dtype=np.int64)
    sides = (a_ptrs, a.value, a.rmin, a.rmax, a.wmin, b_ptrs, b.value, b.rmin, b.rmax, b.wmin)
    counts = np.zeros(a_ptrs.size, dtype=np.int64)
    none32, none64 = np.empty(0, dtype=np.float32), np.empty(0, dtype=np.float64)
    k["merge"](*sides, counts, none32, none64, none64, none64, False)
    ptrs = np.cumsum(counts)
    n = int(ptrs[-1])
    value = np.empty(n, dtype=np.float32)
    rmin, rmax, wmin = (np.empty(n, dtype=np.float64) for _ in range(3))
    k["merge"](*sides, ptrs, value, rmin, rmax, wmin, True)
    return Summary(ptrs, value, rmin, rmax, wmin)
