"""The partition stage in numpy: each row's node, rows moved to split nodes' children (partition/cuda.py's oracle)."""

from __future__ import annotations

import numpy as np

from ..category_sets import in_sets, pack_sets
from ..ellpack.reference import feature_bins

class RowPartition:
    """Which node each row is in: positions[r] is the node id of row r.

    A forest of n_trees trees can be grown together (multiclass: one tree per class,
    each level of all of them in one pass): it has n_trees * n_rows "virtual" rows,
    c * n_rows + r being row r in tree c, and node id g belongs to tree g % n_trees
    (tree c's root is node c). One tree is the case n_trees = 1.
    """

    def __init__(self, n_rows: int, n_trees: int = 1):
        self.n_rows, self.n_trees = n_rows, n_trees
        self.positions = np.repeat(np.arange(n_trees, dtype=np.int32), n_rows)
        # Every node id in positions is below this (apply_splits raises it): the compiled
        # loops' tables indexed by node cover every node (they read them without a check).
        self.node_count = n_trees


def node_count(part: RowPartition) -> int:
    """A bound on the node ids in part's positions (their maximum, for a partition that does not keep one)."""
    count = getattr(part, "node_count", None)
    if count is None:
        count = int(part.positions.max()) + 1 if part.positions.size else 1
    return count

def new_partition(n_rows: int, n_trees: int = 1) -> RowPartition:
    return RowPartition(n_rows, n_trees)

def node_lookup(node_ids, positions, values):
    """values[i] for rows whose node is node_ids[i]; -1 for rows in other nodes."""
    size = int(max(int(np.max(node_ids)) if len(node_ids) else 0, int(positions.max()) if positions.size else 0)) + 1
    table = np.full(size, -1, dtype=np.int64)
    table[np.asarray(node_ids)] = values
    return table[positions]

def apply_splits(ell, part: RowPartition, nids, features, bins, default_left, left_ids, right_ids,
                 categories=None):
    """Move the rows of each split node nids[i] to its left or right child.

    A row goes left when its bin of the split feature is <= bins[i], or when the
    value is missing and default_left[i] is set. categories: None, or per split None or
    the categories that go right (a categorical split: the feature's bin is the row's
    category, category_sets.py). Returns nothing: the numpy partition has no segments to size.
    """
    which = node_lookup(nids, part.positions, np.arange(len(nids)))
    rows = np.flatnonzero(which >= 0)
    s = which[rows]
    features = np.asarray(features, dtype=np.int64)
    b = feature_bins(ell, rows % ell.n_rows if part.n_trees > 1 else rows, features[s])
    go_left = np.where(b < 0, np.asarray(default_left)[s] != 0, b <= np.asarray(bins)[s])
    if categories is not None and any(c is not None for c in categories):
        begin, size, words = pack_sets(categories)
        cat = size[s] > 0
        go_left = np.where(cat & (b >= 0), ~in_sets(np, words, begin[s], size[s], b), go_left)
    part.positions[rows] = np.where(go_left, np.asarray(left_ids)[s], np.asarray(right_ids)[s])
    if len(nids):
        part.node_count = max(part.node_count, int(np.max(left_ids)) + 1, int(np.max(right_ids)) + 1)
