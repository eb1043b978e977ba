"""The predict stage compiled for CPUs (cpu/): reference.py's margins, bit for bit.

predict_margin walks each row of raw values down every tree in one compiled loop (the rows
split between the threads; a row's leaf values added in float32 tree after tree, as the
oracle adds them): the numpy steps, a few array operations a tree level, took 4.8 s for 100K
rows and 100 trees of depth 8, the loop 0.27 s, XGBoost's CPU predictor 0.075 s. Trees laid
out as daskgb makes them (a split's children together, after it) go down in blocks of rows,
each step a select rather than a branch (_walk_blocks: 0.30 -> 0.15 s for 50K rows on
another machine, XGBoost's 0.094 s; since, a node read as one record: 0.16 -> 0.11 s on one
thread, XGBoost's 0.08 s); others (loaded models numbered otherwise, categorical splits) one
row at a time (_walk). The same block walk gives leaf_indices (pred_leaf, the
explain stage's: explain/reference.py's steps took 3.09 s for 50K rows and 100 trees, the
blocks 0.20 s, XGBoost 0.24 s).

add_leaf_values: a row's way down a tree from its bins is what training's partition did to it level by level:
partition/compiled.py apply_splits, over the tree's split nodes at once (a row at a leaf stays
where it is), takes every row one step down; as many passes as the tree is deep bring each to
its leaf, by the same bins and rules as the oracle's (numeric, missing and categorical splits,
dense and sparse layouts). Eval sets watched every round move their margins by each new tree
this way: the numpy steps took ~10 ms a tree on a 50K-row eval set.
"""

from __future__ import annotations

import numpy as np

from .. import cpu
from ..partition.compiled import apply_splits
from ..partition.reference import new_partition

# Below this many rows a thread's share costs less than handing it over.
_MIN_ROWS_PER_THREAD = 1 << 12
_compiled: dict = {}


def _walk(lo, hi, X, nodes, offsets, out, missing, missing_is_nan, node_ptr, words):
    """Rows lo..hi: out[r] += each tree's leaf value for row r (reference.predict_margin). A
    missing value (NaN, or `missing`) takes default_left; else a value < threshold goes left,
    except at a categorical split (a node with a set in node_ptr/words, category_sets.pack),
    where it goes right when its category (truncated toward zero; negative or >= 2^24: none)
    is in the node's set. A node is read as its record (one cache line, not one a field), and
    indices are unsigned (numba checks a signed one for wrap-around on every read): 4.8 s of
    numpy steps -> 0.36 s as separate field arrays -> 0.28 s unsigned -> 0.27 s as records (100K
    rows, 100 trees of depth 8, 2 threads; XGBoost's CPU predictor 0.075 s). Taking 16 rows down
    a tree together, a step each in turn, was only 5% faster."""
    n_trees = offsets.shape[0] - 1
    has_sets = node_ptr.shape[0] > 1
    one = np.uint64(1)
    for r in range(lo, hi):
        ur = np.uint64(r)
        acc = out[ur]
        for t in range(n_trees):
            base = np.uint64(offsets[t])
            g = base
            node = nodes[g]
            while node.left >= 0:
                v = X[ur, np.uint64(node.feature)]
                if v != v or (not missing_is_nan and v == missing):
                    go_left = node.default_left != 0
                else:
                    go_left = v < node.threshold
                    if has_sets and node_ptr[g + one] > node_ptr[g]:
                        inside = False
                        if v >= 0 and v < np.float32(16777216.0):
                            code = np.uint64(v)
                            word = code >> np.uint64(5)
                            if word < np.uint64(node_ptr[g + one] - node_ptr[g]):
                                bit = words[np.uint64(node_ptr[g]) + word] >> np.uint32(code & np.uint64(31))
                                inside = bit & np.uint32(1) != 0
                        go_left = not inside
                g = base + np.uint64(node.left if go_left else node.right)
                node = nodes[g]
            acc += node.value
        out[ur] = acc


def _walk_blocks(lo, hi, X, steps, value, offsets, depths, out, leaves, missing, check_missing):
    """_walk for trees whose right children follow their left ones, after their parent (a
    split's children made together, as daskgb makes them), without categorical splits, _BLOCK_ROWS
    rows down a tree at a time. Each of the block's rows takes the tree's depth in steps and a
    step picks the child by arithmetic on the comparison, not a branch, so the block's rows walk
    side by side and the core overlaps their loads, where a row alone waits on each node's load
    and on each mispredicted turn. A step reads one record of its node (_STEP: the left child,
    feature, threshold, default direction), and a leaf's record sends a row to the leaf itself
    (its "left child" the node before it, its threshold NaN: every row goes "right", to the
    leaf), so a row at its leaf stays with no test of its own. A row's leaf values are added
    tree after tree, as _walk adds them. 50K rows of 28 normal features, 100 trees of depth 8,
    one thread: 0.16-0.17 s with the nodes' fields as arrays of their own and a test of the
    leaf, 0.105-0.12 s so (XGBoost's CPU predictor 0.08 s); indices unsigned, as _walk's (numba
    checks a signed one for wrap-around on every read): 221 -> 131 ms on another machine. With
    leaves of one column a tree, the rows' leaf ids are written there instead (leaf_indices) and
    out is not read."""
    want_leaves = leaves.shape[1] > 0
    n_trees = offsets.shape[0] - 1
    block = _BLOCK_ROWS
    at = np.empty(block, dtype=np.uint64)
    acc = np.empty(block, dtype=np.float32)
    values = X.ravel()
    width = np.uint64(X.shape[1])
    r0 = np.uint64(lo)
    end = np.uint64(hi)
    while r0 < end:
        nb = min(np.uint64(block), end - r0)
        first = r0 * width  # the block's first value
        for i in range(nb):
            acc[i] = 0.0 if want_leaves else out[r0 + np.uint64(i)]
        for t in range(n_trees):
            base = np.uint64(offsets[t])
            for i in range(nb):
                at[i] = base
            for _ in range(depths[t]):
                if check_missing:  # a value equal to `missing` is missing too, and takes the default
                    for i in range(nb):
                        node = steps[at[i]]
                        v = values[first + np.uint64(i) * width + np.uint64(node.feature)]
                        miss = np.uint64(v != v) | np.uint64(v == missing)
                        go_left = (np.uint64(v < node.threshold) & (np.uint64(1) - miss)) | \
                            (miss & np.uint64(node.default_left))
                        at[i] = base + np.uint64(node.left) + np.uint64(1) - go_left
                else:  # NaN compares false: a missing value goes left only by its default
                    for i in range(nb):
                        node = steps[at[i]]
                        v = values[first + np.uint64(i) * width + np.uint64(node.feature)]
                        go_left = np.uint64(v < node.threshold) | (np.uint64(v != v) & np.uint64(node.default_left))
                        at[i] = base + np.uint64(node.left) + np.uint64(1) - go_left
            if want_leaves:
                for i in range(nb):
                    leaves[r0 + np.uint64(i), t] = at[i] - base
            else:
                for i in range(nb):
                    acc[i] += value[at[i]]
        if not want_leaves:
            for i in range(nb):
                out[r0 + np.uint64(i)] = acc[i]
        r0 += nb


def _tree_depths(left, offsets, node_depth, depths):
    """depths[t]: how many splits tree t's deepest leaf lies below its root (_depth), for trees
    whose children follow their parents (node ids grow down the tree, as daskgb makes them)."""
    for t in range(offsets.shape[0] - 1):
        base = offsets[t]
        deepest = 0
        node_depth[base] = 0
        for g in range(base, offsets[t + 1]):
            d = node_depth[g]
            deepest = max(deepest, d)
            if left[g] >= 0:
                node_depth[base + left[g]] = d + 1
                node_depth[base + left[g] + 1] = d + 1
        depths[t] = deepest


# Rows a block of _walk_blocks takes down a tree together (8, 16 and 64 measured alike; 64 is
# XGBoost's CPU predictor's block too).
_BLOCK_ROWS = 64


def _kernels():
    if "walk" not in _compiled:
        _compiled.update(walk=cpu.jit(_walk), blocks=cpu.jit(_walk_blocks), depths=cpu.jit(_tree_depths))
    return _compiled


# A node as _walk_blocks reads it: one 16-byte record.
_STEP = np.dtype([("left", np.int32), ("feature", np.int32), ("threshold", np.float32), ("default_left", np.int32)],
                 align=True)


def _block_walk_args(nodes, offsets, categories):
    """_walk_blocks' tree arguments (the nodes' steps, leaf values, offsets, depths), or None
    where the trees are not laid out for it (a categorical split, or children numbered otherwise)."""
    if categories is not None and np.asarray(categories[0]).size > 1 and np.any(np.diff(categories[0]) > 0):
        return None
    left = np.asarray(nodes["left"], dtype=np.int64)
    local = np.arange(left.size) - np.repeat(offsets[:-1], np.diff(offsets))  # a node's id in its tree
    if not np.all((left < 0) | ((np.asarray(nodes["right"]) == left + 1) & (left > local))):
        return None
    depths = np.zeros(offsets.size - 1, dtype=np.int64)
    _kernels()["depths"](left, offsets, np.zeros(left.size, dtype=np.int64), depths)
    leaf = left < 0
    steps = np.empty(left.size, dtype=_STEP)
    steps["left"] = np.where(leaf, local - 1, left)  # a leaf's "right child": itself
    steps["feature"] = np.where(leaf, 0, np.maximum(np.asarray(nodes["feature"], dtype=np.int64), 0))
    steps["threshold"] = np.where(leaf, np.float32(np.nan), np.asarray(nodes["threshold"], dtype=np.float32))
    steps["default_left"] = np.where(leaf, 0, np.asarray(nodes["default_left"]) != 0)
    return steps, np.ascontiguousarray(nodes["value"]), offsets, depths


def predict_margin(X, nodes, tree_offsets, out, missing: float = np.nan, categories=None):
    """Add the leaf values of every tree to out (float32), tree after tree: reference.predict_margin."""
    _kernels()
    X = np.ascontiguousarray(X, dtype=np.float32)
    target = out if out.flags.c_contiguous else np.ascontiguousarray(out)
    node_ptr, words = categories if categories is not None else (np.zeros(1, np.int64), np.zeros(0, np.uint32))
    missing_is_nan = bool(np.isnan(missing))
    offsets = np.asarray(tree_offsets, dtype=np.int64)
    trees = _block_walk_args(nodes, offsets, categories)
    if trees is not None:
        cpu.run_chunks(_compiled["blocks"], X.shape[0], X, *trees, target, np.zeros((0, 0), dtype=np.int32),
                       np.float32(0.0 if missing_is_nan else missing), np.int64(not missing_is_nan),
                       min_chunk=_MIN_ROWS_PER_THREAD)
    else:
        cpu.run_chunks(_compiled["walk"], X.shape[0], X, np.ascontiguousarray(nodes), offsets,
                       target, np.float32(0.0 if missing_is_nan else missing), missing_is_nan,
                       np.asarray(node_ptr, dtype=np.int64), np.asarray(words, dtype=np.uint32),
                       min_chunk=_MIN_ROWS_PER_THREAD)
    if target is not out:
        out[...] = target
    return out


def leaf_indices(X, nodes, tree_offsets, out, missing: float = np.nan, categories=None) -> None:
    """out[:, t] = the id (within its tree) of the leaf tree t sends each row to:
    explain/reference.py leaf_indices, by _walk_blocks where the trees are laid out for it (else
    the reference's steps)."""
    from ..explain import reference as explain_reference

    offsets = np.asarray(tree_offsets, dtype=np.int64)
    trees = _block_walk_args(nodes, offsets, categories)
    if trees is None or out.dtype != np.int32:
        return explain_reference.leaf_indices(X, nodes, tree_offsets, out, missing, categories=categories)
    X = np.ascontiguousarray(X, dtype=np.float32)
    target = out if out.flags.c_contiguous else np.ascontiguousarray(out)
    missing_is_nan = bool(np.isnan(missing))
    cpu.run_chunks(_kernels()["blocks"], X.shape[0], X, *trees, np.zeros(1, dtype=np.float32), target,
                   np.float32(0.0 if missing_is_nan else missing), np.int64(not missing_is_nan),
                   min_chunk=_MIN_ROWS_PER_THREAD)
    if target is not out:
        out[...] = target
    return None


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
