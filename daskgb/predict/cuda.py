"""The predict stage on a GPU: kernels/predict.cu adds every tree's leaf values to the rows' margins.

Same names and results as predict/reference.py (the oracle).
"""

from __future__ import annotations

import cupy
import numpy as np

from ..arrays import to_host
from ..backend import kernels
from ..ellpack.cuda import ellpack_view
from ..layouts import PREDICT_NODE_DTYPE, TREE_FIELDS
from ..tree import Tree

_KERNELS = kernels.declare("predict.cu", (
    "predict_margin<true>", "predict_margin<false>", "add_leaf_values<true>", "add_leaf_values<false>"))
# Rows of a predict_margin block; its rows are staged in shared memory when they fit in
# _SHARED_ROW_BYTES (the default dynamic shared memory a block may take without opting in).
_PREDICT_THREADS = 128
_SHARED_ROW_BYTES = 48 * 1024


def walk_records(nodes) -> np.ndarray:
    """PREDICT_NODE_DTYPE records as predict.cu's int4 walk records: (left, right, feature |
    default_left << 31, threshold bits, or the value's for a leaf): one 16-byte load a node."""
    nodes = np.ascontiguousarray(nodes, dtype=PREDICT_NODE_DTYPE)
    leaf = nodes["left"] < 0
    out = np.empty((nodes.size, 4), dtype=np.int32)
    out[:, 0], out[:, 1] = nodes["left"], nodes["right"]
    feature = np.where(leaf, 0, nodes["feature"]).astype(np.uint32)
    out[:, 2] = (feature | ((nodes["default_left"] != 0).astype(np.uint32) << np.uint32(31))).view(np.int32)
    out[:, 3] = np.where(leaf, nodes["value"], nodes["threshold"]).astype(np.float32).view(np.int32)
    return out


# The walk records of the last few node arrays predicted with, on their device, by the
# array's identity: a booster packs its trees once and predicts with the same array again
# (a Dask worker, block after block). The entry holds the array, so its id is not reused.
_RECORDS: dict = {}
_RECORDS_KEPT = 4


def _device_records(nodes):
    if not isinstance(nodes, np.ndarray):
        return cupy.asarray(walk_records(to_host(nodes)))
    key = (id(nodes), cupy.cuda.runtime.getDevice())
    hit = _RECORDS.get(key)
    if hit is None or hit[0] is not nodes:
        while len(_RECORDS) >= _RECORDS_KEPT:
            _RECORDS.pop(next(iter(_RECORDS)))
        hit = _RECORDS[key] = (nodes, cupy.asarray(walk_records(nodes)))
    return hit[1]


def predict_margin(X, nodes, tree_offsets, out, missing: float = np.nan, categories=None):
    """Add the leaf values of every tree to out (float32), tree after tree.

    X: (n_rows, n_features) float32; nodes: PREDICT_NODE_DTYPE of all trees
    concatenated (host), tree t owning nodes[tree_offsets[t]:tree_offsets[t+1]].
    A value goes left when it is < threshold; a missing one takes default_left.
    """
    if categories is not None:
        raise NotImplementedError("categorical splits have no CUDA kernel yet (training and prediction with them "
                                  "run on the host)")
    if out.dtype != cupy.float32:
        raise TypeError(f"predict_margin adds into a float32 array, got {out.dtype}")
    X = cupy.ascontiguousarray(X, dtype=cupy.float32)
    n_rows, n_features = X.shape
    offsets = np.asarray(to_host(tree_offsets), dtype=np.int32).ravel()
    n_trees = offsets.size - 1
    if n_rows == 0 or n_trees <= 0:
        return out
    records = _device_records(nodes)
    acc = out if out.flags.c_contiguous else cupy.ascontiguousarray(out)
    smem = _PREDICT_THREADS * n_features * 4
    shared = 0 < smem <= _SHARED_ROW_BYTES
    fn = kernels.function("predict.cu", _KERNELS, f"predict_margin<{kernels.template_flag(shared)}>")
    fn((-(-n_rows // _PREDICT_THREADS),), (_PREDICT_THREADS,),
       (X, np.int64(n_rows), np.int32(n_features), records, cupy.asarray(offsets), np.int32(n_trees),
        np.float32(missing), acc), shared_mem=smem if shared else 0)
    if acc is not out:
        out[...] = acc
    return out

def add_leaf_values(ell, tree, margin) -> None:
    """margin += the tree's leaf value for each row of ell (binned with the training cuts),
    each row routed by its bins in one launch (kernels/predict.cu add_leaf_values; the
    reference is numpy_backend.add_leaf_values). margin: float32, one value a row, any stride.
    tree: a Tree, or a tree grown on the device in growth.cu's layout (a (fields + 1, cap)
    int32 device array, growth/device.py), read there without a copy or a wait."""
    n = int(ell.n_rows)
    if n == 0:
        return
    if margin.dtype != cupy.float32 or margin.shape != (n,):
        raise TypeError(f"add_leaf_values adds into a float32 array of {n} rows, got {margin.dtype} {margin.shape}")
    if isinstance(tree, Tree):
        if tree.n_nodes == 0:
            return
        words = cupy.asarray(tree.words())  # one host-to-device copy
    else:
        words = tree
        if words.dtype != cupy.int32 or words.ndim != 2 or words.shape[0] < len(TREE_FIELDS) or \
                not words.flags.c_contiguous:
            raise TypeError(f"add_leaf_values takes a Tree or growth.cu's (fields, cap) int32 words, got "
                            f"{words.dtype} {words.shape}")
    fn = kernels.function("predict.cu", _KERNELS, f"add_leaf_values<{kernels.template_flag(ell.is_dense)}>")
    kernels.launch_1d(fn, n, (ellpack_view(ell), np.int64(n), words, np.int64(words.shape[1]), margin,
                              np.int64(margin.strides[0] // 4)))
