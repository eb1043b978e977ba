"""The explain stage in numpy: SHAP contributions, Saabas's approximation and leaf indices (the
oracle of explain/cuda.py, and the CPU path)."""

from __future__ import annotations

import numpy as np

from ..category_sets import categorical_left, in_sets
from .paths import REST_BIT


def _is_missing(v, missing: float):
    return np.isnan(v) if np.isnan(missing) else np.isnan(v) | (v == np.float32(missing))


def shap_contributions(X, paths, out, missing: float = np.nan) -> None:
    """out[:, f] += feature f's exact SHAP value (TreeSHAP) of every path, out[:, -1] += the
    paths' expected value; out: (n_rows, n_features + 1) float64.

    Each path is TreeSHAP restricted to one leaf (Lundberg et al.'s EXTEND, then UNWIND of each
    element, as XGBoost's CPU TreeShap runs them at a leaf), vectorised over the rows: a row's
    one fraction on an element is whether it follows it (0 or 1, so a division by it is by 1,
    and the divisions by indices are products by 1 / j). The arithmetic, in float64, is the
    same sequence of operations as kernels/shap.cu's, so the two agree to the last bit."""
    n = X.shape[0]
    for p in range(paths.n_paths):
        s, e = int(paths.offsets[p]), int(paths.offsets[p + 1])
        length = e - s
        depth = length - 1
        z = paths.zero_fraction[s:e]
        o, pw = _path_weights(X, paths, s, length, z, missing)
        leaf = np.float64(paths.value[p])
        bias = leaf
        for k in range(1, length):
            zk = z[k]
            bias = bias * zk
            total = _unwound_sum(pw, depth, o[:, k], zk)
            out[:, paths.feature[s + k]] += total * (o[:, k].astype(np.float64) - zk) * leaf
        out[:, -1] += bias


def shap_interactions(X, paths, out, missing: float = np.nan) -> None:
    """out[:, i, j] += the SHAP interaction of features i != j of every path (XGBoost's: half the
    change of feature j's SHAP value when feature i is known against when it is not); out:
    (n_rows, n_features + 1, n_features + 1) float64. The diagonal is left to the caller (a
    feature's SHAP value less its interactions).

    Within one path, knowing feature i (its element e) leaves the path without e with the leaf
    weighted by e's one fraction, not knowing it by e's zero fraction: the difference is (o_e -
    z_e) times the SHAP values of the path without e, whose weights are the full path's with e
    unwound (XGBoost's UnwindPath). Operations in kernels/shap.cu's order."""
    n = X.shape[0]
    for p in range(paths.n_paths):
        s, e_end = int(paths.offsets[p]), int(paths.offsets[p + 1])
        length = e_end - s
        if length < 3:  # fewer than two features: no pair
            continue
        depth = length - 1
        z = paths.zero_fraction[s:e_end]
        o, pw = _path_weights(X, paths, s, length, z, missing)
        leaf = np.float64(paths.value[p])
        inv_top = 1.0 / (depth + 1)
        for e in range(1, length):
            oe, ze = o[:, e], z[e]
            inv_ze = 1.0 / ze if ze != 0.0 else 0.0
            # The weights of the path without e (depth - 1): UnwindPath.
            pw2 = np.zeros((n, depth))
            next_one = pw[:, depth]
            for i in range(depth - 1, -1, -1):
                with_one = next_one * (depth + 1) * (1.0 / (i + 1))
                without = pw[:, i] * (depth + 1) * inv_ze * (1.0 / (depth - i))
                pw2[:, i] = np.where(oe, with_one, without)
                next_one = np.where(oe, pw[:, i] - pw2[:, i] * ze * (depth - i) * inv_top, next_one)
            scale = (oe.astype(np.float64) - ze) * 0.5 * leaf
            for k in range(1, length):
                if k == e:
                    continue
                zk = z[k]
                total = _unwound_sum(pw2, depth - 1, o[:, k], zk)
                out[:, paths.feature[s + e], paths.feature[s + k]] += total * (o[:, k].astype(np.float64) - zk) * scale


def _unwound_sum(pw, depth: int, one, zero: float):
    """Each row's sum of the weights pw (of a path of `depth`) with the element (one, zero)
    unwound (XGBoost's UnwoundPathSum; kernels/shap.cu's unwound_sum): one is the rows' bool."""
    n = pw.shape[0]
    with_one = np.zeros(n)
    next_one = pw[:, depth]
    inv_top = 1.0 / (depth + 1)
    for i in range(depth - 1, -1, -1):
        tmp = next_one * (depth + 1) * (1.0 / (i + 1))
        with_one = with_one + tmp
        next_one = pw[:, i] - tmp * zero * (depth - i) * inv_top
    without = np.zeros(n)
    if zero != 0.0:
        inv_z = 1.0 / zero
        for i in range(depth - 1, -1, -1):
            without = without + pw[:, i] * inv_z * (depth + 1) * (1.0 / (depth - i))
    return np.where(one, with_one, without)


def _path_weights(X, paths, s: int, length: int, z, missing: float):
    """(o, pw): the rows' one fractions (bool, (n, length)) on a path's elements and the path's
    weights after EXTEND of every element, as shap_contributions makes them."""
    n = X.shape[0]
    pw = np.zeros((n, length), dtype=np.float64)
    o = np.ones((n, length), dtype=bool)
    pw[:, 0] = 1.0
    for d in range(1, length):
        v = X[:, paths.feature[s + d]]
        present = (v >= paths.lower[s + d]) & (v < paths.upper[s + d])
        if paths.categorical and paths.category_at[s + d] >= 0:
            present &= category_follows(paths.category_sets, int(paths.category_at[s + d]), v)
        o[:, d] = np.where(_is_missing(v, missing), paths.missing_follows[s + d] != 0, present)
        od = o[:, d].astype(np.float64)
        inv = 1.0 / (d + 1)
        for i in range(d - 1, -1, -1):
            pw[:, i + 1] = pw[:, i + 1] + od * pw[:, i] * (i + 1) * inv
            pw[:, i] = z[d] * pw[:, i] * (d - i) * inv
    return o, pw


def category_follows(sets, at: int, values):
    """Whether present values meet the category condition at sets[at] (explain/paths.py's
    [header, words...]): a category the words reach by its bit, any other (beyond them, or
    invalid: negative, or from 2**24 on) by the rest bit."""
    header = sets[at]
    size = int(header & ~REST_BIT)
    reached = (values >= 0) & (values < 16777216)
    reached &= np.where(reached, values, 0).astype(np.int64) // 32 < size
    return np.where(reached, in_sets(np, sets, at + 1, size, values), bool(header & REST_BIT))


def _next_nodes(X, rows, tree, nid, first: int, categories, missing: float):
    """The children the rows (at nodes nid of the tree whose first packed node is `first`)
    go to: predict/reference.py's routing (default_left for missing values, the category sets
    at categorical splits)."""
    node = tree[nid]
    v = X[rows, node["feature"]]
    miss = _is_missing(v, missing)
    left = np.where(miss, node["default_left"] != 0, v < node["threshold"])
    if categories is not None:
        left = categorical_left(categories, first + nid, v, miss, left)
    return np.where(left, node["left"], node["right"])


def saabas_contributions(X, nodes, tree_offsets, means, out, missing: float = np.nan, categories=None) -> None:
    """out[:, f] += the change of the node mean at every split on feature f along each row's
    path, tree after tree; out[:, -1] += each tree's root mean (XGBoost's approx_contribs).
    nodes: PREDICT_NODE_DTYPE of all trees, means: their node_means, float64; categories:
    None, or category_sets.pack's (node_ptr, words) of the nodes (as predict_margin's)."""
    n = X.shape[0]
    rows = np.arange(n)
    for t in range(len(tree_offsets) - 1):
        a = int(tree_offsets[t])
        tree = nodes[a : int(tree_offsets[t + 1])]
        mean = means[a : int(tree_offsets[t + 1])]
        out[:, -1] += mean[0]
        nid = np.zeros(n, dtype=np.int64)
        active = rows[tree["left"][nid] >= 0]
        while active.size:
            f = tree["feature"][nid[active]]
            child = _next_nodes(X, active, tree, nid[active], a, categories, missing)
            np.add.at(out, (active, f), mean[child] - mean[nid[active]])
            nid[active] = child
            active = active[tree["left"][nid[active]] >= 0]


def leaf_indices(X, nodes, tree_offsets, out, missing: float = np.nan, categories=None) -> None:
    """out[:, t] = the id (within its tree) of the leaf tree t sends each row to (categories
    as saabas_contributions')."""
    n = X.shape[0]
    rows = np.arange(n)
    for t in range(len(tree_offsets) - 1):
        tree = nodes[int(tree_offsets[t]) : int(tree_offsets[t + 1])]
        nid = np.zeros(n, dtype=np.int64)
        active = rows[tree["left"][nid] >= 0]
        while active.size:
            nid[active] = _next_nodes(X, active, tree, nid[active], int(tree_offsets[t]), categories, missing)
            active = active[tree["left"][nid[active]] >= 0]
        out[:, t] = nid
