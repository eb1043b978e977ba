"""The partition stage compiled for CPUs (cpu/): reference.py's apply_splits in one pass over the rows.

Each thread moves its own range of (virtual) rows, so the result cannot depend on the threads.
"""

from __future__ import annotations

import numpy as np

from .. import cpu
from ..category_sets import WORD_BITS, pack_sets
from ..histogram.compiled import global_symbols
from .reference import RowPartition


def _apply(lo, hi, positions, n_rows, split_of_node, sym, is_dense, total_bins, ptrs, features, bins,
           default_left, left_ids, right_ids, cat_begin, cat_size, cat_words):
    """Rows lo..hi: a row of a split node goes to its left or right child (reference.apply_splits).
    sym: histogram/compiled.py's global symbols (total_bins where missing)."""
    stride = sym.shape[1]
    r = lo % n_rows
    for v in range(lo, hi):
        if v > lo:
            r += 1
            if r == n_rows:
                r = 0
        p = positions[v]
        if p >= split_of_node.shape[0]:
            continue
        i = split_of_node[p]
        if i < 0:
            continue
        f = features[i]
        b = np.int64(-1)  # the feature-local bin, -1 where missing
        if is_dense:
            s = np.int64(sym[r, f])
            if s != total_bins:
                b = s - ptrs[f]
        else:
            flo, fhi = ptrs[f], ptrs[f + 1]
            for j in range(stride):
                s = np.int64(sym[r, j])
                if flo <= s < fhi:
                    b = s - flo
        if b < 0:
            left = default_left[i] != 0
        elif cat_size[i] > 0:
            word = b // WORD_BITS
            inside = word < cat_size[i]
            left = not (inside and ((cat_words[cat_begin[i] + word] >> np.uint32(b % WORD_BITS)) & 1) != 0)
        else:
            left = b <= bins[i]
        positions[v] = left_ids[i] if left else right_ids[i]


_compiled = {}

# Below this many rows the pass is one thread's work.
_MIN_ROWS_PER_THREAD = 1 << 15


def apply_splits(ell, part: RowPartition, nids, features, bins, default_left, left_ids, right_ids,
                 categories=None):
    """Move the rows of each split node nids[i] to its left or right child: reference.apply_splits."""
    if not _compiled:
        _compiled["apply"] = cpu.jit(_apply)
    nids = np.asarray(nids, dtype=np.int64)
    if nids.size == 0:
        return
    split_of_node = np.full(int(nids.max()) + 1, -1, dtype=np.int32)
    split_of_node[nids] = np.arange(nids.size, dtype=np.int32)
    if categories is not None and any(c is not None for c in categories):
        cat_begin, cat_size, cat_words = pack_sets(categories)
    else:
        cat_begin = cat_size = np.zeros(nids.size, dtype=np.int64)
        cat_words = np.zeros(1, dtype=np.uint32)
    cpu.run_chunks(
        _compiled["apply"], part.positions.shape[0], part.positions, ell.n_rows, split_of_node, global_symbols(ell),
        bool(ell.is_dense), int(ell.cuts.total_bins), np.asarray(ell.cuts.ptrs, dtype=np.int64),
        np.asarray(features, dtype=np.int64), np.asarray(bins, dtype=np.int64),
        np.asarray(default_left, dtype=np.int8), np.asarray(left_ids, dtype=part.positions.dtype),
        np.asarray(right_ids, dtype=part.positions.dtype), cat_begin, cat_size, cat_words,
        min_chunk=_MIN_ROWS_PER_THREAD)
