"""The histogram stage in numpy: float64 gradient sums per bin in row order (histogram/cuda.py's oracle).

Rows are added in row order, so every bin's sum is the one XGBoost's single-threaded CPU
builder makes; no quantising is needed (prepare_gradients' scale is one).
"""

from __future__ import annotations

import numpy as np

from ..arrays import array_module
from ..ellpack.reference import symbols
from ..partition.reference import node_lookup

def prepare_gradients(gpair, abs_sum=None, wait: bool = True):
    """Per-row gradient pairs in the histogram's type, and the scale back to double.

    float64 histograms need no scaling; abs_sum (used by the fixed-point CUDA
    path to size its scale across workers) and wait (whether the CUDA path waits
    for its scale) are accepted and have no effect here.
    """
    return np.asarray(gpair, dtype=np.float32), np.ones(2, dtype=np.float64)

def gradient_abs_sums(gpair):
    """(2,) float64 sums of |gradient| and |hessian| over the rows."""
    return np.abs(np.asarray(gpair, dtype=np.float64)).sum(axis=0)

def sum_gradients(gpair_native):
    """Sum of all rows' gradient pairs, accumulated row by row in double as XGBoost does."""
    if gpair_native.shape[0] == 0:
        return np.zeros(2, dtype=np.float64)
    return np.cumsum(gpair_native.astype(np.float64), axis=0)[-1]

def build_histograms(ell, gpair_native, part, build_nodes):
    """(len(build_nodes), total_bins, 2) float64 gradient sums per bin of each node.

    Rows are added in row order, so every bin's sum is accumulated as XGBoost's
    single-threaded CPU builder accumulates it.
    """
    k = len(build_nodes)
    total_bins = ell.cuts.total_bins
    slot = node_lookup(build_nodes, part.positions, np.arange(k))
    rows = np.flatnonzero(slot >= 0)
    ell_rows = rows % ell.n_rows if part.n_trees > 1 else rows
    hist = np.empty((k, total_bins, 2), dtype=np.float64)
    if ell.is_dense:
        # A feature at a time: its symbols are its own bins, and each row's g and h are read
        # as they are, with no (rows x features) copies of them and no mask (a third of the
        # time of one count over every present (row, feature) pair). Missing values' null
        # symbol counts past every feature's bins and is dropped.
        sym = symbols(ell)
        every_row = ell_rows.size == ell.n_rows and part.n_trees == 1  # a root: no gather
        width = int(ell.null_symbol) + 1
        base = slot[rows] * width
        g, h = gpair_native[rows, 0], gpair_native[rows, 1]
        ptrs = np.asarray(ell.cuts.ptrs, dtype=np.int64)
        key = np.empty(rows.size, dtype=np.intp)
        for f in range(ell.n_features):
            lo, hi = int(ptrs[f]), int(ptrs[f + 1])
            np.add(base, sym[:, f] if every_row else sym[ell_rows, f], out=key)
            hist[:, lo:hi, 0] = np.bincount(key, weights=g, minlength=k * width).reshape(k, width)[:, : hi - lo]
            hist[:, lo:hi, 1] = np.bincount(key, weights=h, minlength=k * width).reshape(k, width)[:, : hi - lo]
        return hist
    # Global bins, and the null symbol where a row has fewer values.
    sym = symbols(ell)[ell_rows].astype(np.int64)
    present = sym != ell.null_symbol
    key = (slot[rows][:, None] * total_bins + sym)[present]
    g = np.broadcast_to(gpair_native[rows, 0:1], sym.shape)[present]
    h = np.broadcast_to(gpair_native[rows, 1:2], sym.shape)[present]
    hist[..., 0] = np.bincount(key, weights=g, minlength=k * total_bins).reshape(k, total_bins)
    hist[..., 1] = np.bincount(key, weights=h, minlength=k * total_bins).reshape(k, total_bins)
    return hist

def children_histograms(parents, parent_rows, built, build_right, parent_left, parent_right):
    """The children of k split nodes: (2k, total_bins, 2) histograms and (2k, 2) sums.

    Split i's parent is row parent_rows[i] of parents (histograms) and of parent_left /
    parent_right (the sums of its best split's children); built[i] is the histogram of
    its right child where build_right[i], else of its left child, and the sibling is the
    parent minus it. Split i's left child is row 2i of the results, its right child 2i + 1.
    """
    xp = array_module(built)  # also histogram/cuda.py's reference
    rows = xp.asarray(np.asarray(parent_rows, dtype=np.int64))
    br = xp.asarray(np.asarray(build_right, dtype=bool))[:, None, None]
    other = parents[rows] - built
    hist = xp.stack([xp.where(br, other, built), xp.where(br, built, other)], axis=1)
    sums = xp.stack([parent_left[rows], parent_right[rows]], axis=1)
    return hist.reshape(-1, *built.shape[1:]), sums.reshape(-1, 2)
