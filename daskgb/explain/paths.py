"""Trees as root-to-leaf paths for TreeSHAP (GPUTreeShap's decomposition: a tree's SHAP values
are the sum over its leaves of one path's, so every (row, path) pair is independent work).

A path is its leaf's value and one element per distinct feature split on along it, after a
first "bias" element (feature -1, always followed). Splits of one feature along a path merge
into one element: a row follows it when its value lies in [lower, upper) (the intersection of
the splits' sides: x < threshold goes left) or, where the value is missing, when every one of
those splits sends missing values this way. An element's zero fraction is the share of the
training cover (sum of hessians) that took its edges: cover(child) / cover(parent), multiplied
over merged splits. The paths of all trees of one output group are packed flat (offsets).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class Paths:
    """All paths of some trees, flat: path p owns elements offsets[p]:offsets[p + 1], its first
    the bias element."""

    offsets: np.ndarray  # (n_paths + 1,) int64
    feature: np.ndarray  # (n_elements,) int32, -1 for the bias element
    lower: np.ndarray  # float32: a present value follows when lower <= x < upper
    upper: np.ndarray
    missing_follows: np.ndarray  # int8: a missing value follows
    zero_fraction: np.ndarray  # float64
    value: np.ndarray  # (n_paths,) float32: the leaf's value

    @property
    def n_paths(self) -> int:
        return int(self.offsets.size - 1)

    @property
    def longest(self) -> int:
        """The most elements of one path (the bias element included)."""
        return int(np.diff(self.offsets).max()) if self.n_paths else 0


def tree_paths(trees) -> Paths:
    """The paths of every leaf of the trees (in tree order, each tree's leaves by node id).

    Vectorised over all leaves of all trees at once: the walk up to the root is one step a
    level, and merging a feature's repeated splits is one pass per pair of levels."""
    parts = []
    for t in trees:
        leaves = np.flatnonzero(t.left < 0)
        if t.n_nodes == 1 or leaves.size == 0:  # a lone root: one path of the bias element only
            leaves = np.zeros(1, dtype=np.int64)
        parts.append((t, leaves))
    if not parts:
        return _empty()
    # The edges of each leaf's path, walked up from the leaf: (n_leaves, depth) tables.
    cols = {k: [] for k in ("feature", "lower", "upper", "miss", "zero", "valid")}
    values, depth_max = [], max(int(t.depth.max()) if t.n_nodes else 0 for t, _ in parts)
    for t, leaves in parts:
        n = leaves.size
        feat = np.full((n, depth_max), -1, dtype=np.int32)
        lower = np.full((n, depth_max), -np.inf, dtype=np.float32)
        upper = np.full((n, depth_max), np.inf, dtype=np.float32)
        miss = np.ones((n, depth_max), dtype=bool)
        zero = np.ones((n, depth_max), dtype=np.float64)
        valid = np.zeros((n, depth_max), dtype=bool)
        node = leaves.astype(np.int64)
        parent = t.parent.astype(np.int64)
        cover = t.cover.astype(np.float64)
        step = 0
        while True:
            up = parent[node] if t.n_nodes > 1 else np.full(n, -1)
            live = up >= 0
            if not live.any():
                break
            p = np.where(live, up, 0)
            went_left = t.left[p] == node
            thr = t.threshold[p]
            feat[:, step] = np.where(live, t.feature[p], -1)
            upper[:, step] = np.where(live & went_left, thr, np.inf)
            lower[:, step] = np.where(live & ~went_left, thr, -np.inf)
            miss[:, step] = np.where(live, (t.default_left[p] != 0) == went_left, True)
            with np.errstate(divide="ignore", invalid="ignore"):
                zero[:, step] = np.where(live, cover[node] / cover[p], 1.0)
            valid[:, step] = live
            node = np.where(live, p, node)
            step += 1
        for k, v in (("feature", feat), ("lower", lower), ("upper", upper), ("miss", miss), ("zero", zero),
                     ("valid", valid)):
            cols[k].append(v)
        values.append(t.value[leaves].astype(np.float32))
    feat, lower, upper, miss, zero, valid = (np.concatenate(cols[k]) for k in
                                             ("feature", "lower", "upper", "miss", "zero", "valid"))
    # Root first (the walk went up from the leaves); the order of a path's elements does not
    # change its SHAP values, but a fixed one keeps every backend's sums in one order.
    lengths = valid.sum(axis=1)
    order = lengths[:, None] - 1 - np.arange(depth_max)[None, :]
    rows = np.arange(feat.shape[0])[:, None]
    take = np.where(order >= 0, order, 0)
    feat, lower, upper, miss, zero = (np.where(order >= 0, a[rows, take], fill) for a, fill in
                                      ((feat, -1), (lower, -np.inf), (upper, np.inf), (miss, True), (zero, 1.0)))
    valid = order >= 0
    # Merge each split into the first element of its feature on the path.
    for j in range(1, depth_max):
        for i in range(j):
            same = valid[:, j] & valid[:, i] & (feat[:, i] == feat[:, j])
            if not same.any():
                continue
            lower[same, i] = np.maximum(lower[same, i], lower[same, j])
            upper[same, i] = np.minimum(upper[same, i], upper[same, j])
            miss[same, i] &= miss[same, j]
            zero[same, i] *= zero[same, j]
            valid[same, j] = False
    counts = valid.sum(axis=1) + 1  # the bias element first
    offsets = np.zeros(counts.size + 1, dtype=np.int64)
    offsets[1:] = np.cumsum(counts)
    n_el = int(offsets[-1])
    out_feat = np.full(n_el, -1, dtype=np.int32)
    out_lower = np.full(n_el, -np.inf, dtype=np.float32)
    out_upper = np.full(n_el, np.inf, dtype=np.float32)
    out_miss = np.ones(n_el, dtype=np.int8)
    out_zero = np.ones(n_el, dtype=np.float64)
    # Element slots: the bias at offsets[p], then the path's live elements in order.
    slot = offsets[:-1, None] + np.cumsum(valid, axis=1)
    out_feat[slot[valid]] = feat[valid]
    out_lower[slot[valid]] = lower[valid]
    out_upper[slot[valid]] = upper[valid]
    out_miss[slot[valid]] = miss[valid]
    out_zero[slot[valid]] = zero[valid]
    return Paths(offsets, out_feat, out_lower, out_upper, out_miss, out_zero, np.concatenate(values))


def _empty() -> Paths:
    return Paths(np.zeros(1, dtype=np.int64), np.zeros(0, np.int32), np.zeros(0, np.float32),
                 np.zeros(0, np.float32), np.zeros(0, np.int8), np.zeros(0, np.float64), np.zeros(0, np.float32))


def node_means(tree) -> np.ndarray:
    """Each node's mean leaf value under the training cover (XGBoost's FillNodeMeanValues:
    a leaf its value, an inner node its children's means weighted by their covers over its own),
    float64: what Saabas's contributions and the bias column are made of."""
    mean = np.zeros(tree.n_nodes, dtype=np.float64)
    cover = tree.cover.astype(np.float64)
    # Children have larger ids than their parent? Not for every grower: go by depth, deepest first.
    for node in np.argsort(-tree.depth, kind="stable"):
        if tree.left[node] < 0:
            mean[node] = tree.value[node]
        else:
            a, b = tree.left[node], tree.right[node]
            mean[node] = (mean[a] * cover[a] + mean[b] * cover[b]) / cover[node]
    return mean
