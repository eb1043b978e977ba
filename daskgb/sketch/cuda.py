"""The sketch on a GPU (kernels/sketch.cu): a dense block's summaries, prune, merge, the cuts, and the segmented search.

Every step here is one of kernels/sketch.cu's kernels, a thrust sort, a memset or a copy between
host and device: no CuPy element-wise operation, reduction or fancy index, each of which NVRTC
compiles on its first use in a process (a cold start waits ~0.1 s for each, ~4.5 s for a CUB
reduction). The array steps are the reference of every one, bit for bit: sketch/reference.py's
summarize_dense (summary.py's exact_summary, then prune_with) and segmented search, and
sketch/__init__.py's prune, merge (with _fix_error), make_cuts and _concat_features, which hand
device summaries to these.
"""

from __future__ import annotations

import cupy
import numpy as np

from ..backend import kernels
from .cuts import Cuts
from .summary import Summary, _empty_summary, check_prune_budget

_KERNELS = kernels.declare("sketch.cu", (
    "segmented_search_right", "segmented_search_left", "sketch_keys_u32", "sketch_keys_u64", "sketch_run_tiles_u32",
    "sketch_run_tiles_u64", "sketch_exclusive_scan", "sketch_run_starts_u32", "sketch_run_starts_u64",
    "sketch_run_lo_u32", "sketch_run_lo_u64", "sketch_candidates", "sketch_distinct_counts", "sketch_distinct_write",
    "sketch_entries_u32", "sketch_entries_u64", "sketch_prune_candidates", "sketch_gather", "sketch_cuts",
    "sketch_concat", "sketch_merge_ranks", "sketch_merge_write", "sketch_fix_error"))


# Blocks of the key kernel and the run kernels: threads, and keys a thread takes (kSketchItems).
_KEY_THREADS, _KEY_ITEMS = 256, 8
# The one block that scans the tiles' run counts.
_SCAN_THREADS = 1024
# Blocks of the kernels that take a warp a segment (distinct candidates, cuts) or a block a feature (merge).
_WARP_THREADS, _FEATURE_THREADS = 256, 256


def _kernel(name):
    return kernels.function("sketch.cu", _KERNELS, name)


def _warps(fn, n_segments: int, args) -> None:
    """Launch a kernel that takes a warp a segment."""
    if n_segments > 0:
        fn((-(-n_segments * 32 // _WARP_THREADS),), (_WARP_THREADS,), args)


def summarize_dense(block, missing: float, budget):
    """sketch/reference.py's summarize_dense in a few launches: the (rows, k) block's present
    entries (neither NaN nor `missing`) as (column, value) keys written by one kernel, sorted
    once, then each column's exact unweighted summary (budget None, or no more distinct values
    than the budget) or that summary pruned to `budget` (sketch.prune), read off the sorted
    keys' runs. The exact summary's float arrays are never built: a pruned column's entries
    are the runs its queries pick. Two host waits a block (the keys' count, each column's first
    run), a third where a column is pruned (how many runs it keeps)."""
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
    starts, run_lo_dev, run_lo = _runs(keys, k, suffix)
    n_runs = int(starts.size)
    runs = np.diff(run_lo)
    budget = 0 if budget is None else int(budget)
    if budget == 0 or (runs <= budget).all():
        kept, identity, ptrs = starts, 1, run_lo  # every run of every column: kept is not read
    else:
        cand_ptr = np.zeros(k + 1, dtype=np.int64)
        np.cumsum(np.minimum(runs, budget), out=cand_ptr[1:])
        cand_ptr_dev = cupy.asarray(cand_ptr)
        cand = cupy.empty(int(cand_ptr[-1]), dtype=cupy.int64)
        kernels.launch_1d(_kernel("sketch_candidates"), cand.size,
                          (starts, np.int64(n_runs), np.int64(n), run_lo_dev, cand_ptr_dev, np.int32(k),
                           np.int32(budget), cand))
        kept, ptrs = _distinct(cand, cand_ptr_dev)
        identity = 0
        del cand
    n_kept = int(ptrs[-1])
    value = cupy.empty(n_kept, dtype=cupy.float32)
    rmin, rmax, wmin = (cupy.empty(n_kept, dtype=cupy.float64) for _ in range(3))
    kernels.launch_1d(_kernel(f"sketch_entries_{suffix}"), n_kept,
                      (keys, np.int64(n), starts, np.int64(n_runs), kept, np.int32(identity), np.int64(n_kept),
                       run_lo_dev, np.int32(k), value, rmin, rmax, wmin))
    return Summary(ptrs, value, rmin, rmax, wmin)


def _runs(keys, k: int, suffix: str):
    """The sorted keys' runs of equal keys: each run's first key index (device, ascending), and
    each column's first run (run_lo, k + 1 entries: on the device and on the host, the one wait)."""
    n = int(keys.size)
    n_tiles = -(-n // (_KEY_THREADS * _KEY_ITEMS))
    tile_first = cupy.empty(n_tiles + 1, dtype=cupy.int64)
    _kernel(f"sketch_run_tiles_{suffix}")((n_tiles,), (_KEY_THREADS,), (keys, np.int64(n), tile_first))
    _kernel("sketch_exclusive_scan")((1,), (_SCAN_THREADS,), (tile_first, np.int64(n_tiles), tile_first))
    # Room for a run a key: the runs' count is on the device until run_lo comes back, and waiting
    # for it alone would cost a second wait. The sort before took more.
    starts = cupy.empty(n, dtype=cupy.int64)
    _kernel(f"sketch_run_starts_{suffix}")((n_tiles,), (_KEY_THREADS,), (keys, np.int64(n), tile_first, starts))
    run_lo_dev = cupy.empty(k + 1, dtype=cupy.int64)
    kernels.launch_1d(_kernel(f"sketch_run_lo_{suffix}"), k + 1,
                      (keys, starts, tile_first[n_tiles:], np.int32(k), run_lo_dev))
    run_lo = run_lo_dev.get()
    return starts[: int(run_lo[k])], run_lo_dev, run_lo


def _distinct(cand, cand_ptr_dev):
    """Each segment's distinct candidates (cand[cand_ptr[s]:cand_ptr[s + 1]], ascending where the
    ranks are in order), written segment after segment: (kept on the device, its host pointers).
    Candidates are indices into one array, each segment's within its own range, so a sort of all
    of them orders every segment in place: the rare summary whose picks do not ascend takes it."""
    n_segments = int(cand_ptr_dev.size) - 1
    counts = _distinct_counts(cand, cand_ptr_dev, n_segments)
    if counts[-1]:
        cand.sort()
        counts = _distinct_counts(cand, cand_ptr_dev, n_segments)
    ptrs = np.zeros(n_segments + 1, dtype=np.int64)
    np.cumsum(counts[:-1], out=ptrs[1:])
    kept = cupy.empty(int(ptrs[-1]), dtype=cupy.int64)
    _warps(_kernel("sketch_distinct_write"), n_segments,
           (cand, cand_ptr_dev, np.int64(n_segments), cupy.asarray(ptrs), kept))
    return kept, ptrs


def _distinct_counts(cand, cand_ptr_dev, n_segments: int) -> np.ndarray:
    counts = cupy.zeros(n_segments + 1, dtype=cupy.int64)  # the last: set where a segment descends
    _warps(_kernel("sketch_distinct_counts"), n_segments, (cand, cand_ptr_dev, np.int64(n_segments), counts))
    return counts.get()


def _on_device(s: Summary) -> Summary:
    """s with contiguous device arrays of the Summary's dtypes (no copy where they are so already)."""
    return Summary(s.ptrs, cupy.ascontiguousarray(cupy.asarray(s.value), dtype=cupy.float32),
                   *(cupy.ascontiguousarray(cupy.asarray(a), dtype=cupy.float64) for a in (s.rmin, s.rmax, s.wmin)))


def prune(s: Summary, budget: int) -> Summary:
    """sketch.prune (summary.prune_with, its reference) in kernels: each feature's candidates --
    all its entries where it holds no more than the budget, else its first, its queries' picks
    and its last -- then their distinct ones per feature (one host wait: how many), gathered."""
    budget = check_prune_budget(budget)
    counts = np.diff(s.ptrs)
    if not (counts > budget).any():
        return s
    s = _on_device(s)
    cand_ptr = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(np.minimum(counts, budget), out=cand_ptr[1:])
    cand_ptr_dev = cupy.asarray(cand_ptr)
    cand = cupy.empty(int(cand_ptr[-1]), dtype=cupy.int64)
    kernels.launch_1d(_kernel("sketch_prune_candidates"), cand.size,
                      (s.rmin, s.rmax, s.wmin, cupy.asarray(s.ptrs), cand_ptr_dev, np.int32(counts.size),
                       np.int32(budget), cand))
    kept, ptrs = _distinct(cand, cand_ptr_dev)
    del cand
    return _gather(s, kept, ptrs)


def take(s: Summary, index: np.ndarray, ptrs: np.ndarray) -> Summary:
    """sketch._take_features on a device summary: the entries `index` (host) in one launch, one
    copy up (a CuPy fancy index would compile on its first use)."""
    return _gather(_on_device(s), cupy.asarray(index), ptrs)


def _gather(s: Summary, kept, ptrs: np.ndarray) -> Summary:
    """The entries `kept` (device indices into s) as a summary of pointers `ptrs`."""
    n = int(kept.size)
    value = cupy.empty(n, dtype=cupy.float32)
    rmin, rmax, wmin = (cupy.empty(n, dtype=cupy.float64) for _ in range(3))
    kernels.launch_1d(_kernel("sketch_gather"), n,
                      (kept, np.int64(n), s.value, s.rmin, s.rmax, s.wmin, value, rmin, rmax, wmin))
    return Summary(ptrs, value, rmin, rmax, wmin)


def concat(parts: list[Summary]) -> Summary:
    """sketch._concat_features of two or more device summaries in one launch: the parts' array
    addresses and first entries go to the device in one copy."""
    parts = [_on_device(p) for p in parts]
    ptrs = [np.zeros(1, dtype=np.int64)]
    offset = 0
    for p in parts:
        ptrs.append(p.ptrs[1:] + offset)
        offset += int(p.ptrs[-1])
    ptrs = np.concatenate(ptrs)
    part_ptr = np.zeros(len(parts) + 1, dtype=np.int64)
    np.cumsum([p.value.size for p in parts], out=part_ptr[1:])
    addresses = np.array([a.data.ptr for p in parts for a in (p.value, p.rmin, p.rmax, p.wmin)], dtype=np.uint64)
    table = cupy.asarray(np.concatenate([addresses.view(np.int64), part_ptr]))
    n = int(part_ptr[-1])
    value = cupy.empty(n, dtype=cupy.float32)
    rmin, rmax, wmin = (cupy.empty(n, dtype=cupy.float64) for _ in range(3))
    kernels.launch_1d(_kernel("sketch_concat"), n,
                      (table, table[addresses.size:], np.int32(len(parts)), value, rmin, rmax, wmin))
    return Summary(ptrs, value, rmin, rmax, wmin)


def merge(a: Summary, b: Summary) -> Summary:
    """sketch.merge of two non-empty summaries of the same features, in kernels: each side's
    entries placed among the other's (with the count of values both hold, one host wait), both
    written in merged order, then FixError (fix_error)."""
    a, b = _on_device(a), _on_device(b)
    k = a.n_features
    na, nb = int(a.value.size), int(b.value.size)
    a_ptrs, b_ptrs = cupy.asarray(a.ptrs), cupy.asarray(b.ptrs)
    ja, jb = cupy.empty(na, dtype=cupy.int64), cupy.empty(nb, dtype=cupy.int64)
    eq_a, eq_b = cupy.empty(na, dtype=cupy.uint8), cupy.empty(nb, dtype=cupy.uint8)
    shared = cupy.zeros(k, dtype=cupy.uint64)
    ranks = _kernel("sketch_merge_ranks")
    kernels.launch_1d(ranks, na, (a.value, a_ptrs, np.int64(na), b.value, b_ptrs, np.int32(k), ja, eq_a, shared,
                                  np.int32(1)))
    kernels.launch_1d(ranks, nb, (b.value, b_ptrs, np.int64(nb), a.value, a_ptrs, np.int32(k), jb, eq_b, shared,
                                  np.int32(0)))
    ptrs = a.ptrs + b.ptrs
    ptrs[1:] -= np.cumsum(shared.get().astype(np.int64))
    n = int(ptrs[-1])
    value = cupy.empty(n, dtype=cupy.float32)
    rmin, rmax, wmin = (cupy.empty(n, dtype=cupy.float64) for _ in range(3))
    _kernel("sketch_merge_write")((k,), (_FEATURE_THREADS,),
                                  (a.value, a.rmin, a.rmax, a.wmin, a_ptrs, np.int64(na), ja, eq_a,
                                   b.value, b.rmin, b.rmax, b.wmin, b_ptrs, np.int64(nb), jb, eq_b,
                                   cupy.asarray(ptrs), value, rmin, rmax, wmin))
    return fix_error(Summary(ptrs, value, rmin, rmax, wmin))


def fix_error(s: Summary) -> Summary:
    """sketch._fix_error in one launch, a block a feature: run always, since it returns ranks
    already in order unchanged (the array steps check first, to skip their scans)."""
    if s.value.size < 2:
        return s
    s = _on_device(s)
    rmin, rmax = cupy.empty_like(s.rmin), cupy.empty_like(s.rmax)
    _kernel("sketch_fix_error")((s.n_features,), (_FEATURE_THREADS,),
                                (s.rmin, s.rmax, s.wmin, cupy.asarray(s.ptrs), rmin, rmax))
    return Summary(s.ptrs, s.value, rmin, rmax, s.wmin)


def cuts(s: Summary, max_bin: int, cut_ptrs: np.ndarray, eps: np.float32, eps64: np.float64) -> Cuts:
    """sketch.make_cuts' cut values and min values from a summary pruned to max_bin + 1 entries
    a feature, in one launch (a warp a feature); cut_ptrs: the host's bin pointers."""
    s = _on_device(s)
    k = s.n_features
    cut_ptrs_dev = cupy.asarray(cut_ptrs.astype(np.int32))
    values = cupy.empty(int(cut_ptrs[-1]), dtype=cupy.float32)
    min_values = cupy.empty(k, dtype=cupy.float32)
    _warps(_kernel("sketch_cuts"), k, (s.value, cupy.asarray(s.ptrs), np.int64(k), np.int32(max_bin), cut_ptrs_dev,
                                       np.float32(eps), np.float64(eps64), values, min_values))
    return Cuts(cut_ptrs_dev, values, min_values)


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
