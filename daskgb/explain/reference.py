"""The explain stage in numpy: SHAP contributions, Saabas's approximation and leaf indices (the
oracle of explain/cuda.py, and the CPU path)."""

from __future__ import annotations

import numpy as np


def _is_missing(v, missing: float):
    return np.isnan(v) if np.isnan(missing) else np.isnan(v) | (v == np.float32(missing))


def shap_contributions(X, paths, out, missing: float = np.nan) -> None:
    """out[:, f] += feature f's exact SHAP value (TreeSHAP) of every path, out[:, -1] += the
    paths' expected value; out: (n_rows, n_features + 1) float64.

    Each path is TreeSHAP restricted to one leaf (Lundberg et al.'s EXTEND and UNWIND, as
    XGBoost's CPU TreeShap runs them at a leaf), vectorised over the rows: a row's one
    fraction on an element is whether it follows it. The arithmetic, in float64, is the same
    sequence of operations as kernels/shap.cu's."""
    n = X.shape[0]
    for p in range(paths.n_paths):
        s, e = int(paths.offsets[p]), int(paths.offsets[p + 1])
        length = e - s
        z = paths.zero_fraction[s:e]
        o = np.ones((n, length), dtype=np.float64)
        for k in range(1, length):
            v = X[:, paths.feature[s + k]]
            follows = np.where(_is_missing(v, missing), paths.missing_follows[s + k] != 0,
                               (v >= paths.lower[s + k]) & (v < paths.upper[s + k]))
            o[:, k] = follows
        pw = _extended(o, z)
        value = np.float64(paths.value[p])
        depth = length - 1
        for k in range(1, length):
            total = _unwound_sum(pw, depth, o[:, k], z[k])
            out[:, paths.feature[s + k]] += total * (o[:, k] - z[k]) * value
        bias = value
        for k in range(1, length):
            bias = bias * z[k]
        out[:, -1] += bias


def _extended(o, z):
    """The path's permutation weights after EXTEND of every element, in order: (n, length)."""
    n, length = o.shape
    pw = np.zeros((n, length), dtype=np.float64)
    pw[:, 0] = 1.0  # the bias element (zero and one fractions 1)
    for d in range(1, length):
        pw[:, d] = 0.0
        for i in range(d - 1, -1, -1):
            pw[:, i + 1] += o[:, d] * pw[:, i] * (i + 1) / (d + 1)
            pw[:, i] = z[d] * pw[:, i] * (d - i) / (d + 1)
    return pw


def _unwound_sum(pw, depth: int, one, zero: float):
    """The sum of the weights with element (one, zero) unwound (XGBoost's UnwoundPathSum):
    one is 0 or 1 per row."""
    total = np.zeros(pw.shape[0], dtype=np.float64)
    next_one = pw[:, depth].copy()
    has_one = one != 0
    safe_one = np.where(has_one, one, 1.0)
    for i in range(depth - 1, -1, -1):
        tmp = next_one * (depth + 1) / ((i + 1) * safe_one)
        with_one = total + tmp
        next_one = np.where(has_one, pw[:, i] - tmp * zero * (depth - i) / (depth + 1), next_one)
        if zero != 0:
            without = total + (pw[:, i] / zero) / ((depth - i) / (depth + 1))
        else:
            without = total
        total = np.where(has_one, with_one, without)
    return total


def saabas_contributions(X, nodes, tree_offsets, means, out, missing: float = np.nan) -> None:
    """out[:, f] += the change of the node mean at every split on feature f along each row's
    path, tree after tree; out[:, -1] += each tree's root mean (XGBoost's approx_contribs).
    nodes: PREDICT_NODE_DTYPE of all trees, means: their node_means, float64."""
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
            node = tree[nid[active]]
            f = node["feature"]
            v = X[active, f]
            left = np.where(_is_missing(v, missing), node["default_left"] != 0, v < node["threshold"])
            child = np.where(left, node["left"], node["right"])
            np.add.at(out, (active, f), mean[child] - mean[nid[active]])
            nid[active] = child
            active = active[tree["left"][nid[active]] >= 0]


def leaf_indices(X, nodes, tree_offsets, out, missing: float = np.nan) -> None:
    """out[:, t] = the id (within its tree) of the leaf tree t sends each row to."""
    n = X.shape[0]
    rows = np.arange(n)
    for t in range(len(tree_offsets) - 1):
        tree = nodes[int(tree_offsets[t]) : int(tree_offsets[t + 1])]
        nid = np.zeros(n, dtype=np.int64)
        active = rows[tree["left"][nid] >= 0]
        while active.size:
            node = tree[nid[active]]
            v = X[active, node["feature"]]
            left = np.where(_is_missing(v, missing), node["default_left"] != 0, v < node["threshold"])
            nid[active] = np.where(left, node["left"], node["right"])
            active = active[tree["left"][nid[active]] >= 0]
        out[:, t] = nid
