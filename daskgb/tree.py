"""A regression tree as flat arrays, the form training builds and prediction reads."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ._types import PREDICT_NODE_DTYPE

_FIELDS = {
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

    def to_dict(self) -> dict:
        return {name: getattr(self, name).tolist() for name in _FIELDS}

    @classmethod
    def from_dict(cls, d: dict) -> "Tree":
        return cls(**{name: np.asarray(d[name], dtype=dtype) for name, dtype in _FIELDS.items()})


class TreeBuilder:
    """Grows a Tree node by node (host lists, turned into arrays once at the end)."""

    def __init__(self):
        self._nodes: list[dict] = []

    def add_node(self, parent: int, depth: int, base_weight: float, value: float, cover: float) -> int:
        self._nodes.append(
            dict(left=-1, right=-1, parent=parent, feature=-1, bin=-1, threshold=0.0, default_left=0,
                 value=value, base_weight=base_weight, gain=0.0, cover=cover, depth=depth)
        )
        return len(self._nodes) - 1

    def split(self, nid: int, feature: int, bin: int, threshold: float, default_left: bool, gain: float,
              left: int, right: int) -> None:
        n = self._nodes[nid]
        n.update(feature=feature, bin=bin, threshold=threshold, default_left=int(default_left), gain=gain,
                 left=left, right=right, value=0.0)

    def build(self) -> Tree:
        return Tree(**{name: np.asarray([n[name] for n in self._nodes], dtype=dtype) for name, dtype in _FIELDS.items()})
