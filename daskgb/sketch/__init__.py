"""The sketch stage: weighted quantile summaries per feature, merged and pruned across workers, and the histogram cuts.

The summary is the weighted quantile summary of the XGBoost paper (KDD'16 §3.3
and its appendix): per feature, strictly increasing values, each with a lower
bound ``rmin`` and an upper bound ``rmax`` of its rank (the total weight of the
data below it, and at or below it) and ``wmin``, a lower bound of the weight of
the data equal to it. An exact summary (every distinct value, true ranks) has
error 0; merging an ε1- and an ε2-approximate summary gives a max(ε1, ε2)-
approximate one; pruning to ``b + 1`` entries adds ``1/b``.

All features live in one flat set of arrays (``ptrs`` marks where each starts),
so merge, prune and cuts are a fixed number of array operations whatever the
number of features. The array steps here are written against an array module and
are the reference; summaries on a GPU take sketch/cuda.py's kernels instead, a
few launches each, which give the same bits without CuPy operations that NVRTC
would compile on first use (a cold start's wait).

XGBoost parity (src/common/quantile.h/.cc, XGBOOST_GPU_NOTES.md §2): prune is
``WQSummary::SetPrune``, merge is ``SetCombine`` followed by ``FixError``, cuts
are ``MakeCuts``/``AddCutPoint``. Where a feature has at most ``max_bin``
distinct values no pruning happens and the cuts equal XGBoost's bit for bit.
Ranks are float64 here where XGBoost's CPU sketch uses float32, so pruned
features may pick different entries than XGBoost in near-ties.
"""

from __future__ import annotations

import numpy as np

from .. import cpu
from ..arrays import array_module, to_host
from .cuts import Cuts, with_categories
from .summary import (Summary, _empty_summary, _entry_features, _feature_value_key, block_entries,
                      check_prune_budget, exact_summary, fill_budget, prune_with)

# Dense input is sketched a block of columns at a time; a block holds at most this
# many entries, so working memory is O(this): about 25 bytes an entry on a GPU (keys,
# their sort, the runs' starts: sketch/cuda.py), about 100 in numpy's array steps. A
# column taller than this is sketched in runs of rows (as XGBoost's GPU sketch takes rows
# in batches): each run's summary pruned to the budget, all merged, pruned once more --
# exact where the distinct values fit the budget, within twice a prune's error beyond.
# 16M entries: a Higgs-sized column (10.5M rows) is one run, summarised exactly then pruned.
_BLOCK_ENTRIES = 1 << 24

# XGBoost's padding below the first and above the last value: the float 1e-5f, which
# its arithmetic then widens to double (see make_cuts).
_KRT_EPS = np.float32(1e-5)
_KRT_EPS64 = np.float64(_KRT_EPS)



# ----------------------------------------------------------------------------- budget
def sketch_budget(n_rows: int, max_bin: int) -> int:
    """Entries a column's summary keeps while sketching `n_rows` rows for `max_bin` bins.

    XGBoost's LimitSizeLevel as XGBOOST_GPU_NOTES.md §2 gives it: eps = 1/min(max_bin, n);
    the smallest nlevel with 2**nlevel * limit >= n, where
    limit = min(n, ceil(nlevel / (eps/2)) + 1). The result is `limit` itself (factor 1):
    the eps/2 already carries XGBoost's over-sampling factor, and it reproduces the
    notes' figures (max_bin 256: 1e6 rows -> 4097, 1e8 rows -> 7169). Older XGBoost
    sources (RequiredSampleCutsPerColumn, 2.x) use eps = 1/(8 max_bin) with nlevel/eps,
    i.e. 14337 entries for 1e6 rows: larger sketches for the same cuts.
    """
    n = int(n_rows)
    if n <= 0:
        return 0
    if max_bin < 1:
        raise ValueError(f"max_bin must be positive, got {max_bin}")
    b = min(int(max_bin), n)
    nlevel = 1
    while True:
        # ceil(nlevel / (eps/2)) with eps = 1/b is the integer 2*nlevel*b: no float rounding.
        limit = min(n, 2 * nlevel * b + 1)
        if (limit << nlevel) >= n:
            # A pruned summary keeps its first and last entries, so never fewer than 2.
            return max(2, limit)
        nlevel += 1


# ----------------------------------------------------------------------------- helpers
def _device_kernels(xp):
    """sketch/cuda.py where the summaries are CuPy arrays (prune, merge and cuts run its kernels
    there), None for numpy. Imported late: a CPU-only install has no CuPy."""
    if xp is np:
        return None
    from . import cuda

    return cuda


def _segmented_searchsorted(xp, a, lo, hi, v, max_width: int, right: bool):
    """searchsorted of each v[q] in a[lo[q]:hi[q]] (each slice sorted), as an index into a:
    the backend's (sketch/reference.py's lock-step binary search in array steps; on a GPU,
    sketch/cuda.py's kernel, a thread a query; tests compare the two)."""
    from ..backend import backend_of

    return backend_of(xp).segmented_searchsorted(a, lo, hi, v, max_width, right)


def _segmented_cummax(xp, x, local, max_width: int):
    """Running maximum of x within each segment (local: position within its segment).

    Hillis-Steele doubling: log2(widest segment) steps of whole-array operations,
    since a segmented ufunc.accumulate is not available on every backend.
    """
    d = 1
    while d < max_width:
        y = x.copy()
        y[d:] = xp.where(local[d:] >= d, xp.maximum(x[d:], x[:-d]), x[d:])
        x = y
        d *= 2
    return x


def _concat_features(xp, parts: list[Summary], n_features: int) -> Summary:
    """Summaries of consecutive blocks of features, joined into one."""
    if not parts:
        return _empty_summary(xp, n_features)
    if len(parts) == 1:
        return parts[0]
    device = _device_kernels(xp)
    if device is not None:
        return device.concat(parts)
    ptrs = [np.zeros(1, dtype=np.int64)]
    offset = 0
    for p in parts:
        ptrs.append(p.ptrs[1:] + offset)
        offset += int(p.ptrs[-1])
    return Summary(
        np.concatenate(ptrs),
        xp.concatenate([p.value for p in parts]),
        xp.concatenate([p.rmin for p in parts]),
        xp.concatenate([p.rmax for p in parts]),
        xp.concatenate([p.wmin for p in parts]),
    )


def _check_weight(xp, weight, n_rows: int):
    if weight is None:
        return None
    w = xp.asarray(weight).astype(xp.float32, copy=False).ravel()  # XGBoost keeps weights as float32
    if w.size != n_rows:
        raise ValueError(f"weight has {w.size} entries for {n_rows} rows")
    if n_rows and not bool(xp.all(w >= 0)):
        raise ValueError("weights must be non-negative and not NaN")
    return w


# ----------------------------------------------------------------------------- build
def summarize(X, weight=None, missing=float("nan"), budget=None) -> Summary:
    """Per-feature summaries of a dense (n_rows, n_features) matrix.

    An entry is missing when NaN or equal to `missing`. Exact summaries (duplicates
    folded; rmin = weight strictly below, rmax = rmin + wmin), pruned to `budget`
    entries where a feature has more. Columns are taken a block at a time so that
    working memory stays O(n_rows) for tall inputs.
    """
    xp = array_module(X)
    X = xp.asarray(X)
    if X.ndim != 2:
        raise ValueError(f"X must be 2-D, got shape {X.shape}")
    n_rows, n_features = X.shape
    w = _check_weight(xp, weight, n_rows)
    from ..backend import backend_of

    backend = backend_of(xp)
    step = max(1, _BLOCK_ENTRIES // max(n_rows, 1))
    run = max(1, _BLOCK_ENTRIES // step)  # rows summarised at once
    total = None
    # Row runs outside, column blocks inside: each run's summaries of all the features are
    # merged into the others' by one merge (merge works feature by feature, all at once).
    for r0 in range(0, max(n_rows, 1), run):
        parts = []
        for c0 in range(0, n_features, step):
            k = min(step, n_features - c0)
            block = X[r0 : r0 + run, c0 : c0 + k]
            if w is None:
                part = backend.summarize_dense(block, missing, budget)
            else:
                feature, values = block_entries(xp, block)
                part = exact_summary(xp, feature, values, xp.tile(w[r0 : r0 + run], k), k, missing)
                part = part if budget is None else prune(part, budget)
                del values, feature
            parts.append(part)
        joined = _concat_features(xp, parts, n_features)
        # Merging keeps the runs' error bound; one prune at the end adds its own once.
        total = joined if total is None else merge(total, joined)
    if budget is not None and n_rows > run:
        total = prune(total, budget)
    return total


def summarize_csr(indptr, indices, data, n_features, weight=None, missing=float("nan"), budget=None) -> Summary:
    """Per-feature summaries of a CSR matrix (scipy.sparse layout, numpy or cupy arrays).

    Absent entries are missing, and so are stored NaN or `missing`; stored zeros are values.
    """
    xp = array_module(data, indices, indptr)
    indptr = xp.asarray(indptr).astype(xp.int64, copy=False)
    n_rows = int(indptr.size) - 1
    if n_rows < 0:
        raise ValueError("indptr must have at least one entry")
    lo, hi = int(indptr[0]), int(indptr[-1])
    values = xp.asarray(data)[lo:hi].astype(xp.float32, copy=False)
    feature = xp.asarray(indices)[lo:hi].astype(xp.int64, copy=False)
    if feature.size and not (0 <= int(feature.min()) and int(feature.max()) < n_features):
        raise ValueError(f"column indices must lie in [0, {n_features})")
    w = _check_weight(xp, weight, n_rows)
    weights = None
    if w is not None:
        rows = xp.searchsorted(indptr, xp.arange(lo, hi, dtype=xp.int64), side="right") - 1
        weights = w[rows]
    s = exact_summary(xp, feature, values, weights, int(n_features), missing)
    return s if budget is None else prune(s, budget)


# ----------------------------------------------------------------------------- merge
def _insert_ranks(xp, x: Summary, y: Summary, x_feature, x_key, y_key, y_ptrs_dev):
    """For every entry of x: where it falls in y (same feature) and the rank bounds y adds.

    Returns (j, equal, add_rmin, add_rmax): j = number of y entries of the feature with a
    smaller value (as an index into y), equal = y[j] has the same value.
    """
    j = xp.searchsorted(y_key, x_key, side="left")
    j_after = xp.searchsorted(y_key, x_key, side="right")
    equal = j_after > j
    y_lo = y_ptrs_dev[x_feature]
    y_hi = y_ptrs_dev[x_feature + 1]
    last = max(y.value.size - 1, 0)
    prev = xp.clip(j - 1, 0, last)
    nxt = xp.minimum(j_after, last)
    back = xp.clip(y_hi - 1, 0, last)
    # rmin grows by what y certainly holds below the value, rmax by what y may hold at or below it.
    add_rmin = xp.where(j > y_lo, y.rmin[prev] + y.wmin[prev], 0.0)
    add_rmax = xp.where(
        j_after < y_hi, y.rmax[nxt] - y.wmin[nxt], xp.where(y_hi > y_lo, y.rmax[back], 0.0)
    )
    return j, equal, add_rmin, add_rmax


def merge(a: Summary, b: Summary) -> Summary:
    """Merge two summaries of the same features (paper's merge; XGBoost's SetCombine + FixError).

    A value present in both gets the sums of both entries; a value of one side gets the
    other side's bounds from its neighbours there. Exact summaries of rows A and B merge
    into the exact summary of A ∪ B.
    """
    if a.n_features != b.n_features:
        raise ValueError(f"cannot merge summaries of {a.n_features} and {b.n_features} features")
    xp = array_module(a.value, b.value)
    if b.value.size == 0:
        return a
    if a.value.size == 0:
        return b
    device = _device_kernels(xp)
    if device is not None:
        return device.merge(a, b)
    if cpu.compiled_loaded():  # a CPU fit's: the same entries in one walk (sketch/compiled.py)
        from . import compiled

        return _fix_error(xp, compiled.merge(a, b))
    a_ptrs, b_ptrs = xp.asarray(a.ptrs), xp.asarray(b.ptrs)
    fa = _entry_features(xp, a_ptrs, a.value.size)
    fb = _entry_features(xp, b_ptrs, b.value.size)
    ka = _feature_value_key(xp, fa, a.value)
    kb = _feature_value_key(xp, fb, b.value)
    ja, eq_a, a_add_rmin, a_add_rmax = _insert_ranks(xp, a, b, fa, ka, kb, b_ptrs)
    jb, eq_b, b_add_rmin, b_add_rmax = _insert_ranks(xp, b, a, fb, kb, ka, a_ptrs)

    # Output position = distinct values of the feature below this one: own entries below
    # plus the other side's below, minus the shared values counted twice.
    cum_eq = xp.zeros(a.value.size + 1, dtype=xp.int64)
    xp.cumsum(eq_a, out=cum_eq[1:])
    shared = to_host(cum_eq[a_ptrs])
    n_shared = np.diff(shared)
    ptrs = a.ptrs + b.ptrs
    ptrs[1:] -= np.cumsum(n_shared)
    out_ptrs = xp.asarray(ptrs)
    cum_eq_b = xp.zeros(b.value.size + 1, dtype=xp.int64)
    xp.cumsum(eq_b, out=cum_eq_b[1:])

    ia = xp.arange(a.value.size, dtype=xp.int64)
    pos_a = out_ptrs[fa] + (ia - a_ptrs[fa]) + (ja - b_ptrs[fa]) - (cum_eq[ia] - cum_eq[a_ptrs[fa]])
    ib = xp.arange(b.value.size, dtype=xp.int64)
    pos_b = out_ptrs[fb] + (ib - b_ptrs[fb]) + (jb - a_ptrs[fb]) - (cum_eq_b[ib] - cum_eq_b[b_ptrs[fb]])

    n = int(ptrs[-1])
    value = xp.empty(n, dtype=xp.float32)
    rmin = xp.empty(n, dtype=xp.float64)
    rmax = xp.empty(n, dtype=xp.float64)
    wmin = xp.empty(n, dtype=xp.float64)
    jc = xp.minimum(ja, max(b.value.size - 1, 0))
    value[pos_a] = a.value
    rmin[pos_a] = a.rmin + xp.where(eq_a, b.rmin[jc], a_add_rmin)
    rmax[pos_a] = a.rmax + xp.where(eq_a, b.rmax[jc], a_add_rmax)
    wmin[pos_a] = a.wmin + xp.where(eq_a, b.wmin[jc], 0.0)
    only_b = ~eq_b
    pb = pos_b[only_b]
    value[pb] = b.value[only_b]
    rmin[pb] = (b.rmin + b_add_rmin)[only_b]
    rmax[pb] = (b.rmax + b_add_rmax)[only_b]
    wmin[pb] = b.wmin[only_b]
    return _fix_error(xp, Summary(ptrs, value, rmin, rmax, wmin))


# ----------------------------------------------------------------------------- merge order
# Many summaries (a Dask collection's partitions) merge in one fixed tree: neighbours pairwise,
# level by level, an odd last one carried up. Node (level, i) is the merge of summaries
# [i * 2**level, min((i + 1) * 2**level, n)), so a node whose summaries one worker holds all of
# can be merged there, and the tree gives the same bits wherever its nodes were merged.
def merge_tree_root(n: int) -> tuple[int, int]:
    """The root node (level, 0) of the merge tree of n >= 1 summaries."""
    return max(int(n) - 1, 0).bit_length(), 0


def merge_tree_node(nodes: dict, n: int, node: tuple[int, int], budget: int | None = None) -> Summary:
    """Node (level, i) of the merge tree of n summaries, from `nodes`: {(level, i): Summary},
    holding the leaves (0, j) and any nodes already merged beneath it. With a budget, every
    merge is pruned to it (a no-op where no feature holds more entries): the hierarchical
    merge-and-prune sketch_budget is sized for (XGBoost's LimitSizeLevel), and what keeps a
    worker's merged node at a partition's size, not the sum of its partitions' (on 40M
    Higgs-shaped rows, 8 partitions a GPU, each of 4 workers sent ~40 MB to rank 0)."""
    level, i = node
    found = nodes.get(node)
    if found is not None:
        return found
    if level == 0:
        raise KeyError(f"summary {i} of {n} is missing from the merge tree")
    left = merge_tree_node(nodes, n, (level - 1, 2 * i), budget)
    if (2 * i + 1) << (level - 1) >= n:  # no right child: carried up as it is
        return left
    merged = merge(left, merge_tree_node(nodes, n, (level - 1, 2 * i + 1), budget))
    return merged if budget is None else prune(merged, budget)


def held_merge_nodes(held, n: int) -> list[tuple[int, int]]:
    """The largest nodes of the merge tree of n summaries whose summaries are all in `held`
    (indices), in order: what a worker holding them merges itself."""
    held = set(held)
    out: list = []

    def visit(level, i):
        lo, hi = i << level, min((i + 1) << level, n)
        if lo >= n:
            return
        if all(j in held for j in range(lo, hi)):
            out.append((level, i))
        elif level > 0 and any(j in held for j in range(lo, hi)):
            visit(level - 1, 2 * i)
            visit(level - 1, 2 * i + 1)

    if n > 0:
        visit(*merge_tree_root(n))
    return out


def _fix_error(xp, s: Summary) -> Summary:
    """Restore rmin/rmax monotone and rmax >= rmin + wmin after rounding (XGBoost's FixError).

    FixError's sequential loop is a running max: rmin <- cummax(rmin), then
    rmax <- cummax(max(rmax, rmin + wmin)), per feature. Valid inputs rarely need
    it, so one check decides whether to pay for the scans.
    """
    n = s.value.size
    if n < 2:
        return s
    f = _entry_features(xp, xp.asarray(s.ptrs), n)
    same = f[1:] == f[:-1]
    floor = xp.maximum(s.rmax, s.rmin + s.wmin)
    broken = (same & ((s.rmin[1:] < s.rmin[:-1]) | (floor[1:] < floor[:-1]))).any() | (floor != s.rmax).any()
    if not bool(broken):
        return s
    local = xp.arange(n, dtype=xp.int64) - xp.asarray(s.ptrs)[f]
    width = int(np.diff(s.ptrs).max())
    rmin = _segmented_cummax(xp, s.rmin, local, width)
    rmax = _segmented_cummax(xp, xp.maximum(s.rmax, rmin + s.wmin), local, width)
    return Summary(s.ptrs, s.value, rmin, rmax, s.wmin)


# ----------------------------------------------------------------------------- prune
def prune(s: Summary, budget: int) -> Summary:
    """summary.prune_with with the backend's segmented search; on a GPU, sketch/cuda.py's prune
    (its kernels make prune_with's choices); in a CPU fit, sketch/compiled.py's (the same)."""
    device = _device_kernels(array_module(s.value))
    if device is not None:
        return device.prune(s, budget)
    if cpu.compiled_loaded():  # a CPU fit's: prune_with's choices by one compiled pass (sketch/compiled.py)
        from . import compiled

        return compiled.prune(s, budget)
    return prune_with(s, budget, _segmented_searchsorted)

def prune_filled(s: Summary, budget: int) -> Summary:
    """prune(s, budget), with what budget a feature leaves unused spread over the entries it skipped.

    prune's budget - 2 queries are spaced evenly in rank. On a feature whose heavy values (a
    zero a third of the rows hold, a rounded measurement's common readings) each span several
    spacings, several queries land on one entry; repeats are kept once, so the feature keeps
    far fewer entries than the budget -- 131 of 257 on Bosch-shaped columns -- and its light
    tails, often where the label's signal is, fall into a few wide bins. Such features go to
    summary.fill_budget, which adds skipped entries back, evenly, up to the budget; adding
    widens no gap, so the error bound is prune's. A feature that fills its budget keeps
    prune's entries, and one with no more entries than the budget is untouched (exact cuts:
    XGBoost's bit for bit). XGBoost's GPU sketch also gets near the budget (243-248 cuts of 256
    on those columns; it prunes the raw entries before folding repeats); its CPU sketch keeps
    prune's.

    The features filled go through the host (array steps on their summaries, once a fit), so
    both backends give the same bits.
    """
    budget = check_prune_budget(budget)
    counts = np.diff(s.ptrs)
    first = prune(s, budget)
    short = np.flatnonzero((counts > budget) & (np.diff(first.ptrs) < budget))
    if short.size == 0:
        return first
    xp = array_module(s.value)
    filled = fill_budget(_take_features(s, short).to(np), _take_features(first, short).to(np), budget)
    # Splice: the filled features' summaries in place of prune's.
    joined = _concat_features(xp, [first, filled.to(xp)], counts.size + short.size)
    order = np.arange(counts.size, dtype=np.int64)
    order[short] = counts.size + np.arange(short.size, dtype=np.int64)
    return _take_features(joined, order)


def _take_features(s: Summary, features: np.ndarray) -> Summary:
    """The summary of `features` (host indices, in the order given) alone."""
    counts = np.diff(s.ptrs)[features]
    ptrs = np.zeros(features.size + 1, dtype=np.int64)
    np.cumsum(counts, out=ptrs[1:])
    index = np.repeat(s.ptrs[features] - ptrs[:-1], counts) + np.arange(int(ptrs[-1]), dtype=np.int64)
    device = _device_kernels(array_module(s.value))
    if device is not None:
        return device.take(s, index, ptrs)
    return Summary(ptrs, s.value[index], s.rmin[index], s.rmax[index], s.wmin[index])


# ----------------------------------------------------------------------------- cuts
def _largest(s: Summary) -> np.ndarray:
    """Each feature's largest value (a summary keeps its extremes), NaN where it has none."""
    out = np.full(s.n_features, np.nan)
    has = np.diff(s.ptrs) > 0
    out[has] = to_host(s.value[array_module(s.value).asarray(s.ptrs[1:][has] - 1)])
    return out


def make_cuts(s: Summary, max_bin: int, categorical=None) -> Cuts:
    """Histogram cuts from summaries, as XGBoost's MakeCuts / AddCutPoint.

    Per feature: prune to max_bin + 1 entries a[0..m) (prune_filled: as many as its values
    fill, where XGBoost's CPU sketch keeps fewer on heavily tied features); cut values are a[1..min(m, max_bin)-1]
    followed by the sentinel a[m-1] + (|a[m-1]| + 1e-5); min_value = a[0] - |a[0]| - 1e-5.
    An empty feature gets one bin with min_value = 1e-5 and the sentinel built from it.
    Sentinel and min_value are computed in double from float32 inputs and rounded to
    float32, as XGBoost's CPU code does. A feature with d <= max_bin distinct values gets d bins,
    bin k holding its k-th distinct value. A categorical feature (categorical: bool
    (n_features,) or None) gets a bin per category up to its largest (cuts.with_categories).
    """
    if categorical is not None and np.any(categorical):
        return with_categories(make_cuts(s, max_bin), _largest(s), categorical)
    max_bin = int(max_bin)
    if max_bin < 2:
        raise ValueError(f"max_bin must be at least 2, got {max_bin}")
    s = prune_filled(s, max_bin + 1)
    xp = array_module(s.value)
    m = np.diff(s.ptrs)
    required = np.minimum(m, max_bin)
    n_bins = np.maximum(required, 1)
    cut_ptrs = np.zeros(m.size + 1, dtype=np.int64)
    np.cumsum(n_bins, out=cut_ptrs[1:])
    total = int(cut_ptrs[-1])
    device = _device_kernels(xp)
    if device is not None:
        return device.cuts(s, max_bin, cut_ptrs, _KRT_EPS, _KRT_EPS64)

    # XGBoost computes these in double (its fabs promotes the float32 value) and rounds
    # the result to float32 once; the same here, or the sentinel and min_value drift by an ulp.
    has = m > 0
    has_dev = xp.asarray(has)
    first = s.value[xp.asarray(s.ptrs[:-1][has])].astype(xp.float64)
    last = s.value[xp.asarray(s.ptrs[1:][has] - 1)].astype(xp.float64)
    min_values = xp.full(m.size, _KRT_EPS, dtype=xp.float32)
    min_values[has_dev] = (first - xp.abs(first) - _KRT_EPS64).astype(xp.float32)
    top = min_values.astype(xp.float64)
    top[has_dev] = last
    sentinel = (top + (xp.abs(top) + _KRT_EPS64)).astype(xp.float32)

    values = xp.empty(total, dtype=xp.float32)
    values[xp.asarray(cut_ptrs[1:] - 1)] = sentinel
    # Values strictly increase within a summary, so AddCutPoint's "greater than the last
    # cut" test always passes: the cuts are a[1 .. required-1], in order.
    n = s.value.size
    if n:
        ptrs_dev = xp.asarray(s.ptrs)
        f = _entry_features(xp, ptrs_dev, n)
        local = xp.arange(n, dtype=xp.int64) - ptrs_dev[f]
        take = (local >= 1) & (local < xp.asarray(required)[f])
        dest = xp.asarray(cut_ptrs[:-1])[f] + local - 1
        values[dest[take]] = s.value[take]
    return Cuts(xp.asarray(cut_ptrs.astype(np.int32)), values, min_values)
