"""The predict stage in numpy: margins from trees, for raw or binned rows (the oracle of predict/cuda.py)."""

from __future__ import annotations

import numpy as np

from ..category_sets import categorical_left, pack
from ..ellpack.reference import feature_bins

def predict_margin(X, nodes, tree_offsets, out, missing: float = np.nan, categories=None):
    """Add the leaf values of every tree to out (float32), tree after tree.

    X: (n_rows, n_features) float32; nodes: PREDICT_NODE_DTYPE of all trees
    concatenated, tree t owning nodes[tree_offsets[t]:tree_offsets[t+1]].
    A value goes left when it is < threshold; a missing one takes default_left.
    categories: None, or category_sets.pack's (node_ptr, words) of the nodes: at a
    categorical split a value goes right when its category is in the node's set.
    """
    n = X.shape[0]
    rows = np.arange(n)
    for t in range(len(tree_offsets) - 1):
        tree = nodes[tree_offsets[t] : tree_offsets[t + 1]]
        nid = np.zeros(n, dtype=np.int64)
        active = rows[tree["left"][nid] >= 0]
        while active.size:
            node = tree[nid[active]]
            v = X[active, node["feature"]]
            miss = np.isnan(v) if np.isnan(missing) else np.isnan(v) | (v == np.float32(missing))
            left = np.where(miss, node["default_left"] != 0, v < node["threshold"])
            if categories is not None:
                left = categorical_left(categories, tree_offsets[t] + nid[active], v, miss, left)
            nid[active] = np.where(left, node["left"], node["right"])
            active = active[tree["left"][nid[active]] >= 0]
        out += tree["value"][nid]
    return out

def add_leaf_values(ell, tree, margin) -> None:
    """margin += the tree's leaf value for each row of ell (binned with the training cuts),
    each row routed by its bins as training's partition routes it: a bin <= the split's
    goes left, a missing value takes default_left."""
    node = np.zeros(ell.n_rows, dtype=np.int64)
    rows = np.arange(ell.n_rows)
    sets = pack([tree], [0, tree.n_nodes]) if tree.categories else None
    while rows.size:
        nid = node[rows]
        inner = tree.left[nid] >= 0
        rows, nid = rows[inner], nid[inner]
        if rows.size == 0:
            break
        b = feature_bins(ell, rows, tree.feature[nid].astype(np.int64))
        left = np.where(b < 0, tree.default_left[nid] != 0, b <= tree.bin[nid])
        if tree.categories:  # a categorical feature's bin is the row's category
            left = categorical_left(sets, nid, b, b < 0, left)
        node[rows] = np.where(left, tree.left[nid], tree.right[nid])
    margin += tree.value[node]

