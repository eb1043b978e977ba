"""The predict stage on a GPU: kernels/predict.cu adds every tree's leaf values to the rows' margins.

Same names and results as predict/reference.py (the oracle).
"""

from __future__ import annotations

from dataclasses import replace

import cupy
import numpy as np

from .. import category_sets
from ..arrays import to_host
from ..backend import kernels
from ..ellpack.cuda import ellpack_view
from ..layouts import PREDICT_NODE_DTYPE, TREE_CATEGORY_ROW, TREE_FIELDS
from ..tree import Tree

_KERNELS = kernels.declare("predict.cu", tuple(
    f"{name}<{a}, {c}>" for name in ("predict_margin", "add_leaf_values") for a in ("true", "false")
    for c in ("false", "true")))
# Rows of a predict_margin block; its rows are staged in shared memory when they fit in
# _SHARED_ROW_BYTES (the default dynamic shared memory a block may take without opting in).
_PREDICT_THREADS = 128
_SHARED_ROW_BYTES = 48 * 1024


# A walk record's feature word: default_left at bit 31, a categorical split at bit 30
# (kernels/predict.cu kCategoricalBit), the feature below.
_CATEGORICAL_BIT = np.uint32(1 << 30)


def walk_records(nodes, categories=None) -> tuple[np.ndarray, np.ndarray | None]:
    """(records, category_sets): PREDICT_NODE_DTYPE records as predict.cu's int4 walk records
    (left, right, feature | default_left << 31, threshold bits, or the value's for a leaf):
    one 16-byte load a node. categories: None, or category_sets.pack's (node_ptr, words) of
    the nodes; then a categorical split's feature word has bit 30 set and its threshold slot
    holds the offset of its set in category_sets (uint32, [n_words, words...] a set, in node
    order), still one load a node; category_sets is None without categories."""
    nodes = np.ascontiguousarray(nodes, dtype=PREDICT_NODE_DTYPE)
    leaf = nodes["left"] < 0
    out = np.empty((nodes.size, 4), dtype=np.int32)
    out[:, 0], out[:, 1] = nodes["left"], nodes["right"]
    feature = np.where(leaf, 0, nodes["feature"]).astype(np.uint32)
    if feature.size and int(feature.max()) >= int(_CATEGORICAL_BIT):
        raise ValueError(f"a split feature is {int(feature.max())}: the CUDA walk takes features below 2**30")
    out[:, 2] = (feature | ((nodes["default_left"] != 0).astype(np.uint32) << np.uint32(31))).view(np.int32)
    out[:, 3] = np.where(leaf, nodes["value"], nodes["threshold"]).astype(np.float32).view(np.int32)
    if categories is None:
        return out, None
    node_ptr = np.asarray(categories[0])
    if node_ptr.size != nodes.size + 1:
        raise ValueError(f"the category sets are of {node_ptr.size - 1} nodes, the trees have {nodes.size}")
    at, sets = category_sets.counted(categories)  # each set preceded by its word count
    cat = np.flatnonzero(at >= 0)
    if leaf[cat].any():
        raise ValueError(f"node {int(cat[leaf[cat]][0])} is a leaf with a category set")
    if sets.size > np.iinfo(np.int32).max:
        raise ValueError(f"the category sets hold {sets.size} words: the CUDA walk addresses fewer than 2**31")
    out[cat, 2] = (out[cat, 2].view(np.uint32) | _CATEGORICAL_BIT).view(np.int32)
    out[cat, 3] = at[cat]
    return out, sets


# The walk records (and category sets) of the last few node arrays predicted with, on their
# device, by the arrays' identity: a booster packs its trees (and their sets) once and
# predicts with the same arrays again (a Dask worker, block after block). The entry holds
# the arrays, so their ids are not reused.
_RECORDS: dict = {}
_RECORDS_KEPT = 4


def _device_records(nodes, categories=None):
    """(records, category sets or None) on the current device."""
    if not isinstance(nodes, np.ndarray):
        records, sets = walk_records(to_host(nodes), categories)
        return cupy.asarray(records), None if sets is None else cupy.asarray(sets)
    key = (id(nodes), id(categories), cupy.cuda.runtime.getDevice())
    hit = _RECORDS.get(key)
    if hit is None or hit[0] is not nodes or hit[1] is not categories:
        while len(_RECORDS) >= _RECORDS_KEPT:
            _RECORDS.pop(next(iter(_RECORDS)))
        records, sets = walk_records(nodes, categories)
        hit = _RECORDS[key] = (nodes, categories, cupy.asarray(records),
                               None if sets is None else cupy.asarray(sets))
    return hit[2], hit[3]


def predict_margin(X, nodes, tree_offsets, out, missing: float = np.nan, categories=None):
    """Add the leaf values of every tree to out (float32), tree after tree.

    X: (n_rows, n_features) float32; nodes: PREDICT_NODE_DTYPE of all trees
    concatenated (host), tree t owning nodes[tree_offsets[t]:tree_offsets[t+1]].
    A value goes left when it is < threshold; a missing one takes default_left.
    categories: None, or category_sets.pack's (node_ptr, words) of the nodes (host): at a
    categorical split a present value goes right when its category is in the node's set.
    """
    if out.dtype != cupy.float32:
        raise TypeError(f"predict_margin adds into a float32 array, got {out.dtype}")
    X = cupy.ascontiguousarray(X, dtype=cupy.float32)
    n_rows, n_features = X.shape
    offsets = np.asarray(to_host(tree_offsets), dtype=np.int32).ravel()
    n_trees = offsets.size - 1
    if n_rows == 0 or n_trees <= 0:
        return out
    records, sets = _device_records(nodes, categories)
    acc = out if out.flags.c_contiguous else cupy.ascontiguousarray(out)
    smem = _PREDICT_THREADS * n_features * 4
    shared = 0 < smem <= _SHARED_ROW_BYTES
    categorical = sets is not None
    fn = kernels.function("predict.cu", _KERNELS, f"predict_margin<{kernels.template_flag(shared)}, "
                                                  f"{kernels.template_flag(categorical)}>")
    # The numeric walk never reads the sets: any pointer will do.
    fn((-(-n_rows // _PREDICT_THREADS),), (_PREDICT_THREADS,),
       (X, np.int64(n_rows), np.int32(n_features), records, cupy.asarray(offsets), np.int32(n_trees),
        np.float32(missing), sets if categorical else records, acc), shared_mem=smem if shared else 0)
    if acc is not out:
        out[...] = acc
    return out


# Each categorical-feature flag array (Cuts.categorical, host bool) as uint8 on a device,
# by the array's identity: a matrix's cuts, and every copy of them Cuts.to makes, share it.
_FLAGS: dict = {}
_FLAGS_KEPT = 8


def _device_flags(categorical):
    key = (id(categorical), cupy.cuda.runtime.getDevice())
    hit = _FLAGS.get(key)
    if hit is None or hit[0] is not categorical:
        while len(_FLAGS) >= _FLAGS_KEPT:
            _FLAGS.pop(next(iter(_FLAGS)))
        hit = _FLAGS[key] = (categorical, cupy.asarray(np.asarray(categorical, dtype=bool).astype(np.uint8)))
    return hit[1]


def add_leaf_values(ell, tree, margin) -> None:
    """margin += the tree's leaf value for each row of ell (binned with the training cuts),
    each row routed by its bins in one launch (kernels/predict.cu add_leaf_values; the
    reference is numpy_backend.add_leaf_values). margin: float32, one value a row, any stride.
    tree: a Tree, or a tree grown on the device in growth.cu's layout (a (fields + 1 + W, cap)
    int32 device array, growth/device.py; W rows of category-set words), read there without
    a copy or a wait. A split on one of the cuts' categorical features (ell.cuts.categorical)
    is categorical: a row goes right when its bin, its category, is in the node's set."""
    n = int(ell.n_rows)
    if n == 0:
        return
    if margin.dtype != cupy.float32 or margin.shape != (n,):
        raise TypeError(f"add_leaf_values adds into a float32 array of {n} rows, got {margin.dtype} {margin.shape}")
    flags = ell.cuts.categorical if ell.cuts.has_categorical else None
    if isinstance(tree, Tree):
        if tree.n_nodes == 0:
            return
        words = cupy.asarray(_routing_words(tree, ell.cuts, flags))  # one host-to-device copy
    else:
        words = tree
        if words.dtype != cupy.int32 or words.ndim != 2 or words.shape[0] < len(TREE_FIELDS) or \
                not words.flags.c_contiguous:
            raise TypeError(f"add_leaf_values takes a Tree or growth.cu's (fields, cap) int32 words, got "
                            f"{words.dtype} {words.shape}")
    # Without categorical features no split is categorical (layouts.py): the numeric walk.
    category_rows = max(0, words.shape[0] - TREE_CATEGORY_ROW) if flags is not None else 0
    categorical = category_rows > 0
    fn = kernels.function("predict.cu", _KERNELS, f"add_leaf_values<{kernels.template_flag(ell.is_dense)}, "
                                                  f"{kernels.template_flag(categorical)}>")
    # The numeric walk never reads the flags: any pointer will do.
    kernels.launch_1d(fn, n, (ellpack_view(ell), np.int64(n), words, np.int64(words.shape[1]),
                              _device_flags(flags) if categorical else words, np.int32(category_rows), margin,
                              np.int64(margin.strides[0] // 4)))


def _routing_words(tree: Tree, cuts, flags) -> np.ndarray:
    """tree.words() for the kernel, whose categorical walk (a tree with category sets) takes
    every split on a categorical feature of the cuts (flags) for a categorical one. A numeric
    split "bin <= b" on such a feature (a model trained without the feature's type) is the
    categorical split of set {b + 1, ..., the feature's last bin}, every bin being a category:
    it is written so. A categorical split on a feature the cuts call numeric has no bins that
    are categories: ValueError."""
    if not tree.categories:
        return tree.words()  # no category rows: the numeric walk, every split by bin
    split = np.flatnonzero(~tree.is_leaf)
    on_categorical = (np.zeros(split.size, dtype=bool) if flags is None
                      else np.asarray(flags, dtype=bool)[tree.feature[split]])
    by_category = np.isin(split, np.fromiter(tree.categories, dtype=np.int64, count=len(tree.categories)))
    wrong = split[by_category & ~on_categorical]
    if wrong.size:
        node = int(wrong[0])
        raise ValueError(f"node {node} splits feature {int(tree.feature[node])} by category, and the matrix's cuts "
                         "say the feature is numeric: predict a matrix binned with the model's training cuts")
    numeric = split[on_categorical & ~by_category]
    if numeric.size == 0:
        return tree.words()
    ptrs = to_host(cuts.ptrs).astype(np.int64)
    sets = dict(tree.categories)
    for node in numeric.tolist():
        f = int(tree.feature[node])
        sets[node] = np.arange(int(tree.bin[node]) + 1, ptrs[f + 1] - ptrs[f], dtype=np.int32)
    return replace(tree, categories=sets).words()
