"""The partition stage compiled for CPUs (cpu/): reference.py's apply_splits in one pass over the rows.

Each thread moves its own range of rows (a forest's: of matrix rows, with their trees' virtual
rows), so the result cannot depend on the threads.
"""

from __future__ import annotations

import numpy as np

from .. import cpu
from ..category_sets import WORD_BITS, pack_sets
from ..histogram.compiled import feature_columns, global_symbols, row_lines, row_symbols, rows_sorted
from .reference import RowPartition, node_count


def _apply(lo, hi, positions, n_rows, split_of_node, sym, is_dense, sorted_rows, dense_null, ptrs, features,
           bins, default_left, left_ids, right_ids, cat_begin, cat_size, cat_words):
    """Rows lo..hi: a row of a split node goes to its left or right child (reference.apply_splits).
    sym: a dense matrix's row_symbols (histogram/compiled.py; local bins,
    dense_null where missing), a sparse one's global_symbols (total_bins where missing). A sparse
    row's bin of the feature is its largest entry in the feature's range, as the oracle's
    feature_bins takes it: where the rows never fall (sorted_rows), the entry before the row's
    first >= the range's end (a binary search), else the largest of a scan of the row."""
    stride = sym.shape[1]  # (a sparse matrix's)
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
            if s != dense_null:
                b = s
        elif sorted_rows:
            flo, fhi = ptrs[f], ptrs[f + 1]
            j = 0
            count = stride
            while count > 0:
                half = count >> 1
                if np.int64(sym[r, j + half]) < fhi:
                    j += half + 1
                    count -= half + 1
                else:
                    count = half
            if j > 0 and np.int64(sym[r, j - 1]) >= flo:
                b = np.int64(sym[r, j - 1]) - flo
        else:
            flo, fhi = ptrs[f], ptrs[f + 1]
            for j in range(stride):
                s = np.int64(sym[r, j])
                if flo <= s < fhi:
                    b = max(b, s - flo)
        if b < 0:
            left = default_left[i] != 0
        elif cat_size[i] > 0:
            word = b // WORD_BITS
            inside = word < cat_size[i]
            left = not (inside and ((cat_words[cat_begin[i] + word] >> np.uint32(b % WORD_BITS)) & 1) != 0)
        else:
            left = b <= bins[i]
        positions[v] = left_ids[i] if left else right_ids[i]


def _apply_dense(lo, hi, positions, n_rows, sym, step_feature, step_row, null_symbol, feature_of, last_left_of,
                 default_left_of, left_of, right_of):
    """_apply for numeric splits of a dense matrix, matrix rows lo..hi, each row's trees together
    (virtual rows c * n_rows + r), without a branch: the tables are indexed by node, every node
    of the partition, and a node that does not split has itself as both children (its rows
    stay; a branch on whether a row's node splits is mispredicted wherever some do not). A
    present symbol goes left up to the split's last left bin, a missing one (null_symbol) its
    default way. Feature j of matrix row r is sym[j * step_feature + r * step_row]: the
    row-major symbols where a row spans few cache lines (histogram/compiled.py row_symbols; a
    byte an entry where the bins fit), a row's trees then finding their nodes' features in one
    line (7-class Covertype-shaped rows: 30 against 41 ms a round reading the feature columns,
    a line a tree; 500K Higgs-shaped rows 6.6 against 7.5), else the feature columns, where
    neighbouring rows of a node read one line."""
    n_trees = positions.shape[0] // n_rows
    sj = np.uint64(step_feature)
    # Unsigned indices: numba checks a signed one for wrap-around on every read (a third of the time).
    for r in range(lo, hi):
        row = np.uint64(r) * np.uint64(step_row)
        for c in range(n_trees):
            v = np.uint64(c * n_rows + r)
            p = np.uint64(positions[v])
            s = np.int64(sym[np.uint64(feature_of[p]) * sj + row])
            missing = np.int64(s == null_symbol)
            left = np.int64(s <= last_left_of[p]) * (1 - missing) + default_left_of[p] * missing
            positions[v] = right_of[p] + left * (left_of[p] - right_of[p])


_compiled = {}

# Below this many rows the pass is one thread's work.
_MIN_ROWS_PER_THREAD = 1 << 15
# A dense matrix whose rows span at most this many cache lines is read row-major.
_MAX_LINES_BY_ROWS = 2


def apply_splits(ell, part: RowPartition, nids, features, bins, default_left, left_ids, right_ids,
                 categories=None):
    """Move the rows of each split node nids[i] to its left or right child: reference.apply_splits."""
    if not _compiled:
        _compiled.update(apply=cpu.jit(_apply), dense=cpu.jit(_apply_dense))
    nids = np.asarray(nids, dtype=np.int64)
    if nids.size == 0:
        return
    left_ids = np.asarray(left_ids, dtype=np.int64)
    right_ids = np.asarray(right_ids, dtype=np.int64)
    n_nodes = max(node_count(part), int(left_ids.max()) + 1, int(right_ids.max()) + 1)
    has_categories = categories is not None and any(c is not None for c in categories)
    ptrs = np.asarray(ell.cuts.ptrs, dtype=np.int64)
    features = np.asarray(features, dtype=np.int64)
    if ell.is_dense and not has_categories:
        feature_of = np.zeros(n_nodes, dtype=np.int64)
        last_left_of = np.zeros(n_nodes, dtype=np.int64)
        default_left_of = np.zeros(n_nodes, dtype=np.int64)
        left_of = np.arange(n_nodes, dtype=np.int64)
        right_of = np.arange(n_nodes, dtype=np.int64)
        feature_of[nids] = features
        last_left_of[nids] = np.asarray(bins, dtype=np.int64)
        default_left_of[nids] = np.asarray(default_left, dtype=np.int64)
        left_of[nids] = left_ids
        right_of[nids] = right_ids
        if row_lines(ell) <= _MAX_LINES_BY_ROWS:
            sym, step_feature, step_row = row_symbols(ell).reshape(-1), 1, ell.n_features
        else:
            sym, step_feature, step_row = feature_columns(ell).reshape(-1), ell.n_rows, 1
        cpu.run_chunks(_compiled["dense"], ell.n_rows, part.positions, ell.n_rows, sym, step_feature, step_row,
                       int(ell.null_symbol), feature_of, last_left_of, default_left_of, left_of, right_of,
                       min_chunk=_MIN_ROWS_PER_THREAD)
        part.node_count = n_nodes
        return
    part.node_count = n_nodes
    split_of_node = np.full(int(nids.max()) + 1, -1, dtype=np.int32)
    split_of_node[nids] = np.arange(nids.size, dtype=np.int32)
    if has_categories:
        cat_begin, cat_size, cat_words = pack_sets(categories)
    else:
        cat_begin = cat_size = np.zeros(nids.size, dtype=np.int64)
        cat_words = np.zeros(1, dtype=np.uint32)
    cpu.run_chunks(
        _compiled["apply"], part.positions.shape[0], part.positions, ell.n_rows, split_of_node,
        row_symbols(ell) if ell.is_dense else global_symbols(ell),
        bool(ell.is_dense), bool(not ell.is_dense and rows_sorted(ell)),
        int(ell.null_symbol) if ell.is_dense else int(ell.cuts.total_bins), ptrs, features, np.asarray(bins, dtype=np.int64),
        np.asarray(default_left, dtype=np.int8), np.asarray(left_ids, dtype=part.positions.dtype),
        np.asarray(right_ids, dtype=part.positions.dtype), cat_begin, cat_size, cat_words,
        min_chunk=_MIN_ROWS_PER_THREAD)
