"""The sketch's dense summaries compiled for CPUs (cpu/): reference.summarize_dense's summaries, bit for bit.

The oracle sorts every (column, value) key of a block at once (uint64 keys, one sort of
rows x columns). Here each column's present values are gathered, sorted as float32 by numpy
(which lets go of the GIL: the threads sort columns side by side), then folded into
(value, count) runs and pruned by one compiled loop. Unweighted counts are integers, so the ranks
are exactly the oracle's; equal values -0.0 and 0.0 are one entry, 0.0, as the oracle's keys make them.
"""

from __future__ import annotations

import threading

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


def _column_summary(sorted_values, budget, value, rmin, rmax, wmin, keep):
    """A sorted column's exact summary (its distinct values, -0.0 as 0.0, each with its count as
    wmin and the counts below it as rmin), pruned to budget where it holds more (budget 0:
    never): its entries' count, the entries in value, rmin, rmax, wmin. Counts are integers, so
    the ranks are the oracle's whatever the order of adds."""
    m = 0
    n = sorted_values.shape[0]
    i = 0
    below = 0.0
    while i < n:
        v = sorted_values[i]
        j = i + 1
        while j < n and sorted_values[j] == v:
            j += 1
        count = np.float64(j - i)
        value[m] = v + np.float32(0.0)
        rmin[m] = below
        rmax[m] = below + count
        wmin[m] = count
        below += count
        m += 1
        i = j
    if budget == 0 or m <= budget:
        return m
    ptrs = np.zeros(2, dtype=np.int64)
    ptrs[1] = m
    keep[:m] = False
    _prune_marks(ptrs, rmin, rmax, wmin, budget, keep)
    kept = 0
    for i in range(m):  # kept entries move down, in order (in place: kept <= i)
        if keep[i]:
            value[kept] = value[i]
            rmin[kept] = rmin[i]
            rmax[kept] = rmax[i]
            wmin[kept] = wmin[i]
            kept += 1
    return kept


# A feature of more entries a query than this is pruned by searching each query (_prune_marks).
_WALK_PER_QUERY = 16


def _prune_marks(ptrs, rmin, rmax, wmin, budget, keep):
    """summary.prune_with's choice of entries, feature by feature: keep[i] where entry i stays.
    The same queries in the same arithmetic. Where the queries rise and so does a feature's
    rmin + rmax (a span >= 0 and ranks in order: every summary sketching makes) and the feature
    holds up to _WALK_PER_QUERY entries a query, one walk up its entries answers them all (its
    steps predictable, ~10x faster than searching each, on a partition's 30K entries pruned to
    3.6K); otherwise each query is a binary search."""
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
        # The walk gives the search's answers where both the queries and rmin + rmax rise (as
        # they do in every summary sketching makes); anything else is searched.
        walk = m <= _WALK_PER_QUERY * budget and span >= 0.0
        j = base + 3
        while walk and j < base + m:
            walk = rmin[j] + rmax[j] >= rmin[j - 1] + rmax[j - 1]
            j += 1
        lo = base + 2
        for q in range(1, n_queries + 1):
            dx2 = 2.0 * ((np.float64(q) * span) / (budget - 1) + begin)
            # lo: the first j in [base + 2, base + m) with rmin + rmax > dx2 (else base + m)
            if walk:  # from the last query's answer (the queries rise)
                while lo < base + m and rmin[lo] + rmax[lo] <= dx2:
                    lo += 1
            else:
                lo = base + 2
                hi = base + m
                while lo < hi:
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
_compiling = threading.Lock()


def _kernels():
    if not _compiled:
        # _column_summary calls _prune_marks by its module name, which numba reads as it compiles
        # the caller: compiled first, in its place, under a lock (split/compiled.py's _kernels).
        with _compiling:
            if not _compiled:
                g = globals()
                g["_prune_marks"] = cpu.jit(g["_prune_marks"])
                _compiled.update(present=cpu.jit(_present), column=cpu.jit(_column_summary), prune=_prune_marks,
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

    block = block if block.dtype == np.float32 else block.astype(np.float32)

    def columns(lo, hi):
        buf = np.empty(n_rows, dtype=np.float32)
        keep = np.empty(n_rows, dtype=np.bool_)
        for c in range(lo, hi):
            v = buf[: k["present"](block[:, c], missing32, is_nan_missing, buf)]
            v.sort()
            value = np.empty(v.size, dtype=np.float32)
            rmin, rmax, wmin = (np.empty(v.size, dtype=np.float64) for _ in range(3))
            m = k["column"](v, 0 if budget is None else budget, value, rmin, rmax, wmin, keep)
            s = Summary(np.array([0, m], dtype=np.int64), value[:m], rmin[:m], rmax[:m], wmin[:m])
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
