"""The sketch on a GPU (kernels/sketch.cu): a dense block's summaries, and the segmented binary search.

sketch/reference.py is the reference of both: summarize_dense there is the array steps of
sketch/summary.py's exact_summary (~40 CuPy calls a block, the exact summary's float64 arrays built
whole, then pruned); the segmented search there is whole-array steps, one pass per bit of
the widest slice (~130 small launches for slices of 4M entries on a GPU).
"""

from __future__ import annotations

import cupy
import numpy as np

from ..backend import kernels
from .summary import Summary, _empty_summary

_KERNELS = ("segmented_search_right", "segmented_search_left", "sketch_keys_u32", "sketch_keys_u64",
            "sketch_run_heads_u32", "sketch_run_heads_u64", "sketch_candidates",
            "sketch_entries_u32", "sketch_entries_u64")


# The key kernel's blocks: threads, and entries a thread takes a tile (kSketchItems).
_KEY_THREADS, _KEY_ITEMS = 256, 8


def _kernel(name):
    return kernels.function("sketch.cu", _KERNELS, name)


def summarize_dense(block, missing: float, budget):
    """sketch/reference.py's summarize_dense in a few launches: the (rows, k) block's present
    entries (neither NaN nor `missing`) as (column, value) keys written by one kernel, sorted
    once, then each column's exact unweighted summary (budget None, or no more distinct values
    than the budget) or that summary pruned to `budget` (sketch.prune), read off the sorted
    keys' runs. The exact summary's float arrays are never built: a pruned column's entries
    are the runs its queries pick. Up to four host waits a block (sizes the next step needs)."""
    rows, k = block.shape
    x = block if block.dtype == cupy.float32 else block.astype(cupy.float32)
    suffix, key_dtype = ("u32", cupy.uint32) if k == 1 else ("u64", cupy.uint64)
    keys = cupy.empty(rows * k, dtype=key_dtype)
    found = cupy.zeros(2, dtype=cupy.uint64)
    row_stride, col_stride = (s // x.itemsize for s in x.strides)
    missing_is_nan = bool(np.isnan(missing))
    tile = _KEY_THREADS * _KEY_ITEMS
    _kernel(f"sketch_keys_{suffix}")((max(1, min(-(-rows * k // tile), 2**31 - 1)),), (_KEY_THREADS,),
                                     (x, np.int64(rows), np.int32(k), np.int64(row_stride), np.int64(col_stride),
                                      np.float32(0.0 if missing_is_nan else missing), np.int32(missing_is_nan),
                                      keys, found))
    n, has_inf = (int(v) for v in found.get())
    if has_inf:
        raise ValueError("input contains inf; use missing=inf to treat it as missing")
    if n == 0:
        return _empty_summary(cupy, k)
    keys = keys[:n]
    keys.sort()
    head = cupy.empty(n, dtype=cupy.uint8)
    kernels.launch_1d(_kernel(f"sketch_run_heads_{suffix}"), n, (keys, np.int64(n), head))
    starts = cupy.flatnonzero(head)
    del head
    n_runs = int(starts.size)
    if k == 1:  # one column holds every run: no search, no wait
        run_lo = np.array([0, n_runs], dtype=np.int64)
        run_lo_dev = cupy.asarray(run_lo)
    else:  # each column's first run: the run holding its first key
        key_lo = cupy.searchsorted(keys, cupy.arange(k + 1, dtype=cupy.uint64) << cupy.uint64(32))
        run_lo_dev = cupy.searchsorted(starts, key_lo)
        del key_lo
        run_lo = run_lo_dev.get()
    runs = np.diff(run_lo)
    budget = 0 if budget is None else int(budget)
    if budget == 0 or (runs <= budget).all():
        kept = cupy.arange(n_runs, dtype=cupy.int64)  # every run of every column
        ptrs = run_lo.astype(np.int64)
    else:
        cand_ptr = np.zeros(k + 1, dtype=np.int64)
        np.cumsum(np.where(runs <= budget, runs, budget), out=cand_ptr[1:])
        cand = cupy.empty(int(cand_ptr[-1]), dtype=cupy.int64)
        kernels.launch_1d(_kernel("sketch_candidates"), cand.size,
                          (starts, np.int64(n_runs), np.int64(n), run_lo_dev, cupy.asarray(cand_ptr), np.int32(k),
                           np.int32(budget), cand))
        kept = cupy.unique(cand)  # a pruned column's picks repeat where its runs are fewer than queries
        del cand
        ptrs = cupy.searchsorted(kept, run_lo_dev).get().astype(np.int64)
    n_kept = int(kept.size)
    value = cupy.empty(n_kept, dtype=cupy.float32)
    rmin, rmax, wmin = (cupy.empty(n_kept, dtype=cupy.float64) for _ in range(3))
    kernels.launch_1d(_kernel(f"sketch_entries_{suffix}"), n_kept,
                      (keys, np.int64(n), starts, np.int64(n_runs), kept, np.int64(n_kept), run_lo_dev, np.int32(k),
                       value, rmin, rmax, wmin))
    return Summary(ptrs, value, rmin, rmax, wmin)


def segmented_searchsorted(a, lo, hi, v, right: bool):
    """sketch._segmented_searchsorted in one launch (kernels/sketch.cu): for each query, the
    place of v[q] in the sorted run a[lo[q]:hi[q]] (searchsorted's side "right" or "left"),
    as an index into a. a, v: float64; lo, hi: int64."""
    a = cupy.ascontiguousarray(a, dtype=cupy.float64)
    v = cupy.ascontiguousarray(v, dtype=cupy.float64)
    lo = cupy.ascontiguousarray(lo, dtype=cupy.int64)
    hi = cupy.ascontiguousarray(hi, dtype=cupy.int64)
    out = cupy.empty(v.size, dtype=cupy.int64)
    fn = _kernel("segmented_search_right" if right else "segmented_search_left")
    kernels.launch_1d(fn, v.size, (a, lo, hi, v, np.int64(v.size), out))
    return out
