"""A regression tree as flat arrays, the form training builds and prediction reads."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .category_sets import bitset_of, categories_of
from .layouts import PREDICT_NODE_DTYPE, TREE_CATEGORY_ROW, TREE_FIELDS

# The fields of a tree and their types, in layouts.TREE_FIELDS' order (growth.cu's rows).
_TYPES = {
    "left": np.int32,  # child ids, -1 for a leaf
    "right": np.int32,
    "parent": np.int32,  # -1 for the root
    "feature": np.int32,  # split feature (-1 for a leaf)
    "bin": np.int32,  # last feature-local bin that goes left (training cuts)
    "threshold": np.float32,  # fvalue < threshold goes left
    "default_left": np.int8,  # missing values go left
    "value": np.float32,  # leaf value, learning rate applied
    "base_weight": np.float32,  # the node's weight before the learning rate
    "gain": np.float32,  # loss change of the split (0 for a leaf)
    "cover": np.float32,  # sum of hessians of the node's rows
    "depth": np.int32,
}
FIELDS = {name: _TYPES[name] for name in TREE_FIELDS}


@dataclass
class Tree:
    """One tree; node 0 is the root; nodes are numbered in the order they were made."""

    left: np.ndarray
    right: np.ndarray
    parent: np.ndarray
    feature: np.ndarray
    bin: np.ndarray
    threshold: np.ndarray
    default_left: np.ndarray
    value: np.ndarray
    base_weight: np.ndarray
    gain: np.ndarray
    cover: np.ndarray
    depth: np.ndarray
    # Categorical splits: node id -> the sorted categories (int32) that go right
    # (category_sets.py); the node's threshold and bin are then unused.
    categories: dict = field(default_factory=dict)

    @property
    def n_nodes(self) -> int:
        return int(self.left.size)

    @property
    def is_leaf(self) -> np.ndarray:
        return self.left < 0

    def predict_nodes(self) -> np.ndarray:
        """The nodes as PREDICT_NODE_DTYPE records."""
        out = np.zeros(self.n_nodes, dtype=PREDICT_NODE_DTYPE)
        for name in ("left", "right", "feature", "default_left", "threshold", "value"):
            out[name] = getattr(self, name)
        return out

    def words(self, category_words: int | None = None) -> np.ndarray:
        """The tree in growth.cu's device layout: (len(TREE_FIELDS) + 1 + W, n_nodes) int32, a
        row per field (floats as their bits), the count row (its first word the node count),
        then W rows of category-set words (layouts.py: word w of node n's set in row
        TREE_CATEGORY_ROW + w, column n; zero for numeric nodes). W: category_words, or the
        fewest words that hold the tree's sets (0 when it has none)."""
        sets = {node: bitset_of(cats) for node, cats in self.categories.items()}
        needed = max((b.size for b in sets.values()), default=0)
        n_words = needed if category_words is None else int(category_words)
        if n_words < needed:
            raise ValueError(f"the tree's category sets need {needed} words a set, not {n_words}")
        out = np.zeros((TREE_CATEGORY_ROW + n_words, max(self.n_nodes, 1)), dtype=np.int32)
        for i, name in enumerate(TREE_FIELDS):
            row = getattr(self, name)
            out[i, : self.n_nodes] = row.view(np.int32) if FIELDS[name] == np.float32 else row
        out[len(TREE_FIELDS), 0] = self.n_nodes
        for node, bits in sets.items():
            out[TREE_CATEGORY_ROW : TREE_CATEGORY_ROW + bits.size, node] = bits.view(np.int32)
        return out

    @classmethod
    def from_words(cls, words: np.ndarray) -> "Tree":
        """The Tree of growth.cu's device layout (copied to the host): words() read back. A
        split node whose set words are not all zero is a categorical split (layouts.py: such a
        split's set is never empty)."""
        n_nodes = int(words[len(TREE_FIELDS), 0])
        fields = {}
        for i, name in enumerate(TREE_FIELDS):
            row, dtype = words[i, :n_nodes], FIELDS[name]
            fields[name] = row.view(np.float32).copy() if dtype == np.float32 else row.astype(dtype)
        sets = np.ascontiguousarray(words[TREE_CATEGORY_ROW:, :n_nodes]).view(np.uint32)
        split = fields["left"] >= 0
        fields["categories"] = {int(n): categories_of(sets[:, n])
                                for n in np.flatnonzero(split & sets.any(axis=0)).tolist()}
        return cls(**fields)

    def to_dict(self) -> dict:
        out = {name: getattr(self, name).tolist() for name in FIELDS}
        if self.categories:
            nodes = sorted(self.categories)
            out["categories"] = {"nodes": nodes, "sets": [self.categories[n].tolist() for n in nodes]}
        return out

    @classmethod
    def from_dict(cls, d: dict) -> "Tree":
        fields = {}
        for name, dtype in FIELDS.items():
            values = d[name]
            try:
                fields[name] = np.asarray(values, dtype=dtype)
            except OverflowError:
                raise ValueError(f"its {name} holds a number beyond {np.dtype(dtype).name}") from None
            if dtype == np.int32 and not _integral(values):
                raise ValueError(f"its {name} holds a value that is not an integer")
        cats = d.get("categories")
        if cats is not None:
            if not isinstance(cats, dict) or set(cats) != {"nodes", "sets"} or len(cats["nodes"]) != len(cats["sets"]):
                raise ValueError("its categories must be {'nodes': [...], 'sets': [[...], ...]}, one set per node")
            if not _integral(cats["nodes"]) or not all(_integral(c) for c in cats["sets"]):
                raise ValueError("its categories hold a value that is not an integer")
            fields["categories"] = {int(n): np.asarray(c, dtype=np.int64).astype(np.int32)
                                    for n, c in zip(cats["nodes"], cats["sets"])}
        return cls(**fields)

    def checked(self, n_features: int) -> "Tree":
        """This tree, once its arrays are shown to form a tree over n_features features; else
        ValueError naming the flaw. A tree read from a file must pass: prediction walks child
        links until a leaf, so a link back up would never end and one out of range reads
        memory that is not the tree's (on the GPU, without an error)."""
        lengths = {name: int(np.shape(getattr(self, name))[0]) if np.ndim(getattr(self, name)) == 1 else None
                   for name in FIELDS}
        if len(set(lengths.values())) != 1 or None in lengths.values():
            raise ValueError(f"its node arrays differ in length (or are not lists): {lengths}")
        n = self.n_nodes
        if n == 0:
            raise ValueError("it has no nodes")
        split = ~self.is_leaf
        if np.any((self.left < 0) != (self.right < 0)):
            raise ValueError("a node has one child only")
        children = np.concatenate([self.left[split], self.right[split]]).astype(np.int64)
        if children.size and (children.min() < 1 or children.max() >= n):
            raise ValueError(f"a child id is outside 1..{n - 1} (it has {n} nodes)")
        # The root is no node's child and no node is a child twice: then a walk from the root
        # never meets a node again, so every path ends at a leaf.
        if children.size and np.bincount(children, minlength=n).max() > 1:
            raise ValueError("a node is the child of two nodes (or twice of one): the links do not form a tree")
        feature = self.feature[split]
        if feature.size and (feature.min() < 0 or feature.max() >= n_features):
            raise ValueError(f"a split feature is outside 0..{n_features - 1} (the model has {n_features} features)")
        for node, cats in self.categories.items():
            if not 0 <= node < n or self.left[node] < 0:
                raise ValueError(f"its categories name node {node}, which is not a split node")
            cats = np.asarray(cats)
            if cats.size == 0 or cats.min() < 0 or cats.max() >= (1 << 24):
                raise ValueError(f"the category set of node {node} is empty or holds a category outside 0..2^24-1")
        # A leaf value beyond float32 (1e400 in a file reads as inf) or NaN makes every prediction
        # through it inf or NaN; a split's threshold must be a number to compare with.
        for name in ("value", "threshold", "base_weight"):
            bad = ~np.isfinite(getattr(self, name))
            if name == "threshold":
                bad &= split
            if bad.any():
                raise ValueError(f"its {name} of node {int(np.flatnonzero(bad)[0])} is not a finite float32")
        return self


def _integral(values) -> bool:
    """Whether a list read from JSON holds integers only (a float such as 1.5 would be cut silently)."""
    if isinstance(values, np.ndarray):
        return values.dtype.kind in "iub" or bool(np.all(np.mod(values, 1) == 0))
    return all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) or
               (isinstance(v, float) and v.is_integer()) for v in values)


class TreeBuilder:
    """Grows a Tree: a root, then the children of split nodes a batch at a time, into arrays
    that double in size as needed (no per-node Python objects)."""

    def __init__(self, capacity: int = 64):
        self._n = 0
        self._a = {name: np.empty(capacity, dtype=dtype) for name, dtype in FIELDS.items()}
        self._categories: dict = {}

    def _reserve(self, extra: int) -> None:
        size = next(iter(self._a.values())).size
        if self._n + extra > size:
            size = max(2 * size, self._n + extra)
            for name, a in self._a.items():
                grown = np.empty(size, dtype=a.dtype)
                grown[: self._n] = a[: self._n]
                self._a[name] = grown

    def add_node(self, parent: int, depth: int, base_weight: float, value: float, cover: float) -> int:
        """One leaf; returns its id."""
        return int(self.add_children([parent], [depth], [base_weight], [value], [cover],
                                     [base_weight], [value], [cover], pairs=False)[0][0])

    def add_children(self, parents, depths, left_weight, left_value, left_cover, right_weight, right_value,
                     right_cover, pairs: bool = True):
        """Leaves for the children of each parent: ids (left[i], right[i]), numbered left then right,
        parent after parent (the order XGBoost numbers them in). pairs=False adds one leaf per entry."""
        parents = np.asarray(parents, dtype=np.int64)
        k = parents.size
        width = 2 if pairs else 1
        self._reserve(width * k)
        first, end = self._n, self._n + width * k
        a = self._a
        # The new ids are first..end-1, left and right alternating: slices, not index arrays.
        for j, (w, v, c) in enumerate(((left_weight, left_value, left_cover),
                                       (right_weight, right_value, right_cover))[:width]):
            at = slice(first + j, end, width)
            a["parent"][at] = parents
            a["depth"][at] = depths
            a["base_weight"][at] = w
            a["value"][at] = v
            a["cover"][at] = c
        for name, empty in (("left", -1), ("right", -1), ("feature", -1), ("bin", -1), ("threshold", 0.0),
                            ("default_left", 0), ("gain", 0.0)):
            a[name][first:end] = empty
        self._n = end
        ids = np.arange(first, end, dtype=np.int64).reshape(k, width)
        return ids[:, 0], ids[:, -1]

    def split(self, nids, features, bins, thresholds, default_left, gains, lefts, rights, categories=None) -> None:
        """Turn leaves nids[i] into splits with children (lefts[i], rights[i]); categories: None,
        or per node None (a numeric split) or the categories that go right."""
        a = self._a
        nids = np.asarray(nids, dtype=np.int64)
        a["feature"][nids] = features
        a["bin"][nids] = bins
        a["threshold"][nids] = thresholds
        a["default_left"][nids] = np.asarray(default_left) != 0
        a["gain"][nids] = gains
        a["left"][nids] = lefts
        a["right"][nids] = rights
        a["value"][nids] = 0.0
        if categories is not None:
            for nid, cats in zip(nids.tolist(), categories):
                if cats is not None:
                    self._categories[nid] = np.asarray(cats, dtype=np.int32)
                    a["threshold"][nid] = 0.0  # unused: a categorical split has no threshold
                    a["bin"][nid] = -1

    def build(self) -> Tree:
        return Tree(**{name: a[: self._n].copy() for name, a in self._a.items()}, categories=dict(self._categories))
