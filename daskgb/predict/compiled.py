"""The binned predict step compiled for CPUs (cpu/): reference.add_leaf_values's margins, routed by the compiled partition.

A row's way down a tree from its bins is what training's partition did to it level by level:
partition/compiled.py apply_splits, over the tree's split nodes at once (a row at a leaf stays
where it is), takes every row one step down; as many passes as the tree is deep bring each to
its leaf, by the same bins and rules as the oracle's (numeric, missing and categorical splits,
dense and sparse layouts). Eval sets watched every round move their margins by each new tree
this way: the numpy steps took ~10 ms a tree on a 50K-row eval set.
"""

from __future__ import annotations

import numpy as np

from ..partition.compiled import apply_splits
from ..partition.reference import new_partition


def _depth(left, right) -> int:
    """How many splits the tree's deepest leaf lies below the root."""
    depth, frontier = 0, np.zeros(1, dtype=np.int64)
    while True:
        inner = frontier[left[frontier] >= 0]
        if inner.size == 0:
            return depth
        depth += 1
        frontier = np.concatenate([left[inner], right[inner]])


def add_leaf_values(ell, tree, margin) -> None:
    """margin += the tree's leaf value for each row of ell (binned with the training cuts): reference.add_leaf_values."""
    part = new_partition(ell.n_rows)
    left = np.asarray(tree.left, dtype=np.int64)
    right = np.asarray(tree.right, dtype=np.int64)
    inner = np.flatnonzero(left >= 0)
    if inner.size and ell.n_rows:
        categories = [tree.categories.get(int(n)) for n in inner] if tree.categories else None
        split = (inner, np.asarray(tree.feature)[inner], np.asarray(tree.bin)[inner],
                 np.asarray(tree.default_left)[inner], left[inner], right[inner])
        for _ in range(_depth(left, right)):
            apply_splits(ell, part, *split, categories=categories)
    margin += tree.value[part.positions]
