"""The explain stage on a GPU: kernels/shap.cu launches, one thread per row.

Same names and results as explain/reference.py (the oracle).
"""

from __future__ import annotations

import cupy
import numpy as np

from .. import category_sets
from ..arrays import to_host
from ..backend import kernels
from . import reference

# The kernel's register sizes for a path's weights (kernels/shap.cu's kMax): the smallest that
# holds the longest path; longer paths (deep lossguide trees) take the numpy path.
_SIZES = (8, 16, 32)
# (The sizes are spelled out in the declaration: tests read it without importing this module.)
# Each kernel also takes a categorical flag (the trees have categorical splits, else the numeric
# walk): the last template argument.
_KERNELS = kernels.declare("shap.cu", tuple(f"shap_contribs<{m}, {s}, {c}>" for m in (8, 16, 32)
                                            for s in ("true", "false") for c in ("false", "true"))
                           + tuple(f"shap_interactions<{m}, {c}>" for m in (8, 16, 32) for c in ("false", "true"))
                           + tuple(f"{name}<{c}>" for name in ("saabas_contribs", "leaf_index")
                                   for c in ("false", "true")))
_THREADS = 128
# Each row's sums stay in shared memory where a block's fit in this (48 KiB: what a block may
# take without opting in).
_SHARED_BYTES = 48 * 1024


def _launch(name: str, n_rows: int, args, shared_mem: int = 0) -> None:
    fn = kernels.function("shap.cu", _KERNELS, name)
    fn((-(-n_rows // _THREADS),), (_THREADS,), args, shared_mem=shared_mem)


def _register_size(paths):
    """The kernels' kMax for these paths: the smallest size that holds the longest, or None
    when none does (the numpy path takes them)."""
    return next((m for m in _SIZES if paths.longest <= m), None)


def _on_host(fn, X, paths, out, missing) -> None:
    """fn (a reference.py function) on host copies, its sums written back into out."""
    host = to_host(out)
    fn(to_host(X), paths, host, missing)
    out[...] = cupy.asarray(host)


def _path_args(X, paths, missing, out) -> tuple:
    """The arguments shap.cu's path kernels share: the rows, the paths' arrays (their category
    conditions where they have some), missing, out."""
    X = cupy.ascontiguousarray(X, dtype=cupy.float32)
    offsets = cupy.asarray(paths.offsets)
    if paths.categorical:
        category_at = cupy.asarray(np.asarray(paths.category_at, dtype=np.int64))
        category_sets = cupy.asarray(np.asarray(paths.category_sets, dtype=np.uint32))
    else:  # the numeric walk never reads them: any pointer will do
        category_at = category_sets = offsets
    return (X, np.int64(X.shape[0]), np.int32(X.shape[1]), offsets, np.int32(paths.n_paths),
            cupy.asarray(paths.feature), cupy.asarray(paths.lower), cupy.asarray(paths.upper),
            cupy.asarray(paths.missing_follows), cupy.asarray(paths.zero_fraction), cupy.asarray(paths.value),
            category_at, category_sets, np.float32(missing), out)


def shap_contributions(X, paths, out, missing: float = np.nan) -> None:
    """As reference.shap_contributions, X and out (float64) on the device."""
    n_rows, n_features = X.shape
    if n_rows == 0 or paths.n_paths == 0:
        return
    size = _register_size(paths)
    if size is None:
        return _on_host(reference.shap_contributions, X, paths, out, missing)
    smem = _THREADS * (n_features + 1) * 8
    shared = smem <= _SHARED_BYTES
    acc = out if out.flags.c_contiguous else cupy.ascontiguousarray(out)
    _launch(f"shap_contribs<{size}, {kernels.template_flag(shared)}, {kernels.template_flag(paths.categorical)}>",
            n_rows, _path_args(X, paths, missing, acc), smem if shared else 0)
    if acc is not out:
        out[...] = acc


def shap_interactions(X, paths, out, missing: float = np.nan) -> None:
    """As reference.shap_interactions, X and out ((n, F + 1, F + 1) float64) on the device."""
    n_rows = X.shape[0]
    if n_rows == 0 or paths.n_paths == 0:
        return
    if out.dtype != cupy.float64 or not out.flags.c_contiguous:
        raise TypeError(f"shap_interactions adds into a C-contiguous float64 array, got {out.dtype}")
    size = _register_size(paths)
    if size is None:
        return _on_host(reference.shap_interactions, X, paths, out, missing)
    _launch(f"shap_interactions<{size}, {kernels.template_flag(paths.categorical)}>", n_rows,
            _path_args(X, paths, missing, out))


def _node_columns(nodes, categories) -> tuple[str, tuple]:
    """(the kernels' categorical flag, the node arrays they take): left, right, feature,
    threshold, default_left, then each node's offset of its category set (-1: a numeric
    split) and the sets, each preceded by its word count as predict.cu's walk reads them
    (category_sets.counted); without categories the last two are placeholders."""
    left = cupy.asarray(np.ascontiguousarray(nodes["left"], dtype=np.int32))
    columns = (left, cupy.asarray(np.ascontiguousarray(nodes["right"], dtype=np.int32)),
               cupy.asarray(np.ascontiguousarray(np.maximum(nodes["feature"], 0), dtype=np.int32)),
               cupy.asarray(np.ascontiguousarray(nodes["threshold"], dtype=np.float32)),
               cupy.asarray(np.ascontiguousarray(nodes["default_left"], dtype=np.int8)))
    if categories is None:  # the numeric walk never reads them: any pointer will do
        return "false", columns + (left, left)
    at, sets = category_sets.counted(categories)
    if sets.size > np.iinfo(np.int32).max:
        raise ValueError(f"the category sets hold {sets.size} words: the CUDA walk addresses fewer than 2**31")
    return "true", columns + (cupy.asarray(at.astype(np.int32)), cupy.asarray(sets))


def saabas_contributions(X, nodes, tree_offsets, means, out, missing: float = np.nan, categories=None) -> None:
    """As reference.saabas_contributions, X and out (float64) on the device; nodes, offsets,
    means and categories on the host."""
    n_rows, n_features = X.shape
    n_trees = len(tree_offsets) - 1
    if n_rows == 0 or n_trees <= 0:
        return
    X = cupy.ascontiguousarray(X, dtype=cupy.float32)
    acc = out if out.flags.c_contiguous else cupy.ascontiguousarray(out)
    flag, columns = _node_columns(nodes, categories)
    _launch(f"saabas_contribs<{flag}>", n_rows, (X, np.int64(n_rows), np.int32(n_features),
                                                 cupy.asarray(np.asarray(tree_offsets, dtype=np.int64)),
                                                 np.int32(n_trees), *columns,
                                                 cupy.asarray(np.asarray(means, dtype=np.float64)),
                                                 np.float32(missing), acc))
    if acc is not out:
        out[...] = acc


def leaf_indices(X, nodes, tree_offsets, out, missing: float = np.nan, categories=None) -> None:
    """As reference.leaf_indices, X and out ((n_rows, n_trees) int32) on the device; nodes,
    offsets and categories on the host."""
    n_rows, n_features = X.shape
    n_trees = len(tree_offsets) - 1
    if n_rows == 0 or n_trees <= 0:
        return
    if out.dtype != cupy.int32 or not out.flags.c_contiguous or out.shape != (n_rows, n_trees):
        raise TypeError(f"leaf_indices writes a C-contiguous int32 ({n_rows}, {n_trees}) array, got "
                        f"{out.dtype} {out.shape}")
    X = cupy.ascontiguousarray(X, dtype=cupy.float32)
    flag, columns = _node_columns(nodes, categories)
    _launch(f"leaf_index<{flag}>", n_rows, (X, np.int64(n_rows), np.int32(n_features),
                                            cupy.asarray(np.asarray(tree_offsets, dtype=np.int64)), np.int32(n_trees),
                                            *columns, np.float32(missing), out))
