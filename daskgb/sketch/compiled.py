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
from .reference import segmented_searchsorted
from .summary import Summary, _empty_summary, prune_with


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


_compiled = {}


def _kernels():
    if not _compiled:
        _compiled.update(present=cpu.jit(_present), runs=cpu.jit(_runs))
    return _compiled


def summarize_dense(block, missing: float, budget):
    """Per-column summaries of a dense (rows, k) block, unweighted: reference.summarize_dense's."""
    k = _kernels()
    n_rows, n_cols = block.shape
    parts: list = [None] * n_cols
    is_nan_missing = bool(np.isnan(missing))
    missing32 = np.float32(0.0 if is_nan_missing else missing)

    def columns(lo, hi):
        for c in range(lo, hi):
            col = np.ascontiguousarray(block[:, c], dtype=np.float32)
            buf = np.empty(n_rows, dtype=np.float32)
            v = buf[: k["present"](col, missing32, is_nan_missing, buf)]
            v.sort()
            values = np.empty(v.size, dtype=np.float32)
            counts = np.empty(v.size, dtype=np.int64)
            m = k["runs"](v, values, counts)
            parts[c] = (values[:m], counts[:m], v.size and (np.isinf(v[0]) or np.isinf(v[-1])))

    cpu.run_chunks(columns, n_cols)
    if any(p[2] for p in parts):
        raise ValueError("input contains inf; use missing=inf to treat it as missing")
    sizes = np.array([p[0].size for p in parts], dtype=np.int64)
    if not sizes.sum():
        return _empty_summary(np, n_cols)
    ptrs = np.zeros(n_cols + 1, dtype=np.int64)
    np.cumsum(sizes, out=ptrs[1:])
    counts = np.concatenate([p[1] for p in parts]).astype(np.float64)
    # Ranks restart at 0 in every column: the counts before an entry, within its column.
    before = np.cumsum(counts) - counts
    rmin = before - np.repeat(before[ptrs[:-1][sizes > 0]], sizes[sizes > 0])
    s = Summary(ptrs, np.concatenate([p[0] for p in parts]), rmin, rmin + counts, counts)
    return s if budget is None else prune_with(s, budget, segmented_searchsorted)
