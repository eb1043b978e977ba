"""Trees as root-to-leaf paths for TreeSHAP (GPUTreeShap's decomposition: a tree's SHAP values
are the sum over its leaves of one path's, so every (row, path) pair is independent work).

A path is its leaf's value and one element per distinct feature split on along it, after a
first "bias" element (feature -1, always followed). Splits of one feature along a path merge
into one element: a row follows it when it goes the path's way at every one of those splits
(XGBoost's TreeShap multiplies their one fractions). For a present value that is: it lies in
[lower, upper) (the numeric splits' sides intersected: x < threshold goes left) and, where the
element has categorical splits, its category meets the element's category condition; a
missing value follows when every one of the splits sends missing values this way. An
element's zero fraction is the share of the training cover (sum of hessians) that took its
edges: cover(child) / cover(parent), multiplied over merged splits. The paths of all trees of
one output group are packed flat (offsets).

A category condition (category_sets.py's rule: a value's category is the value truncated
toward zero, a negative one or one from 2**24 on is in no set) is a bitset and a "rest" bit:
a category the words reach follows when its bit is set, any other (beyond the words, or
invalid) when rest is set. Going right at a split is "in its set" (its words, rest 0), going
left "not in it" (the words inverted, rest 1), and the conditions of one element intersect
(words and rest ANDed). Each is stored in category_sets as [header, words...], header =
n_words | rest << 31 (kernels/shap.cu reads the same).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..category_sets import pack

# A category condition's header: the rest bit above the word count (kernels/shap.cu kRestBit).
REST_BIT = np.uint32(1 << 31)


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
    # Trees with categorical splits: (n_elements,) int64, the offset of each element's
    # category condition in category_sets (-1: none), and the conditions (uint32, [header,
    # words...] each). None for trees of numeric splits only.
    category_at: np.ndarray | None = None
    category_sets: np.ndarray | None = None

    @property
    def n_paths(self) -> int:
        return int(self.offsets.size - 1)

    @property
    def longest(self) -> int:
        """The most elements of one path (the bias element included)."""
        return int(np.diff(self.offsets).max()) if self.n_paths else 0

    @property
    def categorical(self) -> bool:
        """Whether some element has a category condition."""
        return self.category_at is not None


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
    # The trees' category sets, their nodes numbered as the trees' nodes packed in order.
    tree_offsets = np.zeros(len(parts) + 1, dtype=np.int64)
    tree_offsets[1:] = np.cumsum([t.n_nodes for t, _ in parts])
    sets = pack([t for t, _ in parts], tree_offsets)
    # The edges of each leaf's path, walked up from the leaf: (n_leaves, depth) tables.
    # cnode: the split's packed node where it is categorical (else -1); left: the edge goes left.
    names = ("feature", "lower", "upper", "miss", "zero", "cnode", "left", "valid")
    cols = {k: [] for k in names}
    values, depth_max = [], max(int(t.depth.max()) if t.n_nodes else 0 for t, _ in parts)
    for (t, leaves), base in zip(parts, tree_offsets[:-1].tolist()):
        n = leaves.size
        feat = np.full((n, depth_max), -1, dtype=np.int32)
        lower = np.full((n, depth_max), -np.inf, dtype=np.float32)
        upper = np.full((n, depth_max), np.inf, dtype=np.float32)
        miss = np.ones((n, depth_max), dtype=bool)
        zero = np.ones((n, depth_max), dtype=np.float64)
        cnode = np.full((n, depth_max), -1, dtype=np.int64)
        left = np.zeros((n, depth_max), dtype=bool)
        valid = np.zeros((n, depth_max), dtype=bool)
        node = leaves.astype(np.int64)
        parent = t.parent.astype(np.int64)
        cover = t.cover.astype(np.float64)
        is_cat = np.zeros(t.n_nodes, dtype=bool)
        if t.categories:
            is_cat[np.fromiter(t.categories, dtype=np.int64, count=len(t.categories))] = True
        step = 0
        while True:
            up = parent[node] if t.n_nodes > 1 else np.full(n, -1)
            live = up >= 0
            if not live.any():
                break
            p = np.where(live, up, 0)
            went_left = t.left[p] == node
            numeric = live & ~is_cat[p]  # a categorical split's threshold is unused
            thr = t.threshold[p]
            feat[:, step] = np.where(live, t.feature[p], -1)
            upper[:, step] = np.where(numeric & went_left, thr, np.inf)
            lower[:, step] = np.where(numeric & ~went_left, thr, -np.inf)
            miss[:, step] = np.where(live, (t.default_left[p] != 0) == went_left, True)
            with np.errstate(divide="ignore", invalid="ignore"):
                zero[:, step] = np.where(live, cover[node] / cover[p], 1.0)
            cnode[:, step] = np.where(live & is_cat[p], base + p, -1)
            left[:, step] = went_left
            valid[:, step] = live
            node = np.where(live, p, node)
            step += 1
        for k, v in zip(names, (feat, lower, upper, miss, zero, cnode, left, valid)):
            cols[k].append(v)
        values.append(t.value[leaves].astype(np.float32))
    feat, lower, upper, miss, zero, cnode, left, valid = (np.concatenate(cols[k]) for k in names)
    # Root first (the walk went up from the leaves); the order of a path's elements does not
    # change its SHAP values, but a fixed one keeps every backend's sums in one order.
    lengths = valid.sum(axis=1)
    order = lengths[:, None] - 1 - np.arange(depth_max)[None, :]
    rows = np.arange(feat.shape[0])[:, None]
    take = np.where(order >= 0, order, 0)
    feat, lower, upper, miss, zero, cnode, left = (
        np.where(order >= 0, a[rows, take], fill) for a, fill in
        ((feat, -1), (lower, -np.inf), (upper, np.inf), (miss, True), (zero, 1.0), (cnode, -1), (left, False)))
    valid = order >= 0
    edge = valid.copy()  # every edge, merged or not
    # Merge each split into the first element of its feature on the path (into: that element).
    into = np.broadcast_to(np.arange(depth_max), feat.shape).copy()
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
            into[same, j] = i
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
    paths = Paths(offsets, out_feat, out_lower, out_upper, out_miss, out_zero, np.concatenate(values))
    categorical = edge & (cnode >= 0)
    if sets is not None and categorical.any():
        # Each categorical edge's condition goes to the element its split merged into.
        target = slot[rows, into][categorical]
        paths.category_at, paths.category_sets = _category_conditions(
            sets, cnode[categorical], left[categorical], out_feat[target], target, n_el)
    return paths


def _category_conditions(sets, nodes, went_left, feature, target, n_elements):
    """(category_at, category_sets) of the elements: each categorical edge (its split's packed
    node, the side it takes, its feature, the element it belongs to) contributes "in the set"
    (right) or "not in it" (left), and an element's edges intersect. A feature's conditions
    all take as many words as its largest set."""
    node_ptr, words = sets
    size = node_ptr[nodes + 1] - node_ptr[nodes]
    category_at = np.full(n_elements, -1, dtype=np.int64)
    chunks, used = [], 0
    for f in np.unique(feature).tolist():
        mine = np.flatnonzero(feature == f)
        width = int(size[mine].max())
        # Each edge's words, padded with zeros (categories beyond a set are not in it).
        col = np.arange(width)
        inside = col[None, :] < size[mine, None]
        bits = np.where(inside, words[np.where(inside, node_ptr[nodes[mine], None] + col[None, :], 0)],
                        np.uint32(0)).astype(np.uint32)
        left = went_left[mine]
        bits[left] = ~bits[left]
        elements, which = np.unique(target[mine], return_inverse=True)
        acc = np.full((elements.size, width), np.uint32(0xFFFFFFFF), dtype=np.uint32)
        np.bitwise_and.at(acc, which, bits)
        rest = np.ones(elements.size, dtype=bool)
        np.logical_and.at(rest, which, left)
        block = np.empty((elements.size, width + 1), dtype=np.uint32)
        block[:, 0] = np.uint32(width) | np.where(rest, REST_BIT, np.uint32(0))
        block[:, 1:] = acc
        category_at[elements] = used + np.arange(elements.size, dtype=np.int64) * (width + 1)
        chunks.append(block.ravel())
        used += block.size
    return category_at, np.concatenate(chunks)


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
