"""Depthwise trees grown on the device, the host waiting once per round (CUDA backend).

grower.grow_forest keeps the host in the loop: at every level it reads the split
records, decides which nodes split, numbers their children and sizes the next launches.
That is about 0.8 ms of Python and CuPy calls a level, more than the device's work on
data of a few hundred thousand rows, and the device idles while the host catches up.
Here kernels/level.cu makes those decisions on the device, and the host queues the
same launches for every tree, each sized for the most nodes its level can have (blocks
past the level's real work return at once). Nothing waits until the round's trees are
done; the host then reads them in one copy.

It covers the common case (applies()): the depthwise policy with max_depth at most
MAX_DEPTH and no max_leaves, no monotone or interaction constraints, no per-node column
sampling, an in-core matrix, and a communicator whose allreduce stays on the device (one
process, or NCCL). A round's trees (one per class) grow one after another, and the host
reads them all at once. Everything else takes grower.grow_forest, the reference;
tests/test_device_growth.py checks that both grow the same trees.
"""

from __future__ import annotations

import cupy
import numpy as np

from ..collective import NcclCommunicator
from ..feature_sets import ColumnSampler
from ..phases import ALLREDUCE, HISTOGRAM, OTHER, SPLIT, mark
from ..tree import FIELDS, Tree
from . import cupy_backend as cb

# False: every tree takes grower.grow_forest (for comparisons).
ENABLED = True
# Deepest tree grown here: a level's splits fit kernels/level.cu's kMaxSplits = 2 ** (MAX_DEPTH - 1).
MAX_DEPTH = 12
_PLAN_THREADS = 1024
_LEVEL = ("grow_root", "expand_level", "label_leaves")
_PARTITION_TILE_ROWS = cb._PARTITION_TILE_ROWS
# Rows a label_leaves block labels, about (its grid is sized by the tree's leaves).
_LABEL_ROWS = 4096


def applies(params, n_trees: int, interaction, monotone, comm) -> bool:
    """Whether a round's n_trees trees can grow here (see the module docstring)."""
    return (ENABLED and cb.USE_SPLIT_KERNEL and n_trees >= 1 and params.grow_policy == "depthwise"
            and 0 < params.max_depth <= MAX_DEPTH and params.max_leaves == 0 and interaction is None
            and monotone is None and params.colsample_bynode == 1.0
            and (comm.world_size == 1 or isinstance(comm, NcclCommunicator)))


def _level_masks(params, n_features: int, tree_index: int):
    """(max_depth, n_features) uint8 on the device: the features each depth may split on
    (grower's NodeFeatures with no per-node sampling), or None when all may."""
    if params.colsample_bytree == 1.0 and params.colsample_bylevel == 1.0:
        return None
    sampler = ColumnSampler(n_features, params.colsample_bytree, params.colsample_bylevel, 1.0, params.seed,
                            tree_index)
    masks = np.zeros((params.max_depth, n_features), dtype=np.uint8)
    for d in range(params.max_depth):
        masks[d, sampler.level_set(d)] = 1
    return cb.to_device(masks)


def _root_sums(ell, gpair, root_hist, comm, from_bins: bool):
    """(1, 2) int64 gradient sums of the root, as grower._root_sums makes them (no host wait)."""
    if from_bins:
        end = int(cb._plan(ell).ptrs_host[1])
        return root_hist[:, :end].sum(axis=1)
    return comm.allreduce(cb.sum_gradients(gpair)[None])


def _root_tiles(ell, setup):
    """The root's histogram tiles (all rows, one node) on the device, and their tile rows:
    the same for every tree of a matrix, so made once."""
    key = ("_cuda_root_tiles", setup.budget)
    hit = ell.__dict__.get(key)
    if hit is None:
        n = ell.n_rows
        tile_rows = setup.tile_rows(n)
        tiles = cb._tiles(np.array([n], dtype=np.int64), [0], np.zeros(1, dtype=np.int64), tile_rows)
        hit = ell.__dict__[key] = (cb.to_device(tiles), tiles.shape[0] - 1, tile_rows)
    return hit


def grow_forest(ell, gpair, scale, params, comm, root_from_bins: bool, tree_indices=(0,)):
    """The round's trees, tree c from gpair[c * n:(c + 1) * n] (n = ell.n_rows): (trees, the
    leaf of every virtual row), as grower.grow_forest returns them: tree c's leaf of row r is
    positions[c * n + r] // K. scale: on the host or the device (prepare_gradients(wait=False),
    whose gradients are checked for NaN once the trees are read)."""
    tree_indices = list(tree_indices)
    k, n = len(tree_indices), ell.n_rows
    positions = cupy.empty(k * n, dtype=cupy.int32)
    words = [grow_tree(ell, gpair[c * n : (c + 1) * n], scale, params, comm, root_from_bins, t,
                       positions[c * n : (c + 1) * n], k, c)
             for c, t in enumerate(tree_indices)]
    host = (words[0][None] if k == 1 else cupy.stack(words)).get()  # the one wait
    gpair.check_finite()  # a scale made on the device is checked here, before the trees are used
    return [_host_tree(h) for h in host], positions


def grow_tree(ell, gpair, scale, params, comm, root_from_bins: bool, tree_index: int, positions, n_trees: int = 1,
              tree: int = 0):
    """One depthwise tree from the FixedGradients gpair, queued on the device: returns its
    words in level.cu's layout (a device array; _host_tree reads them) and labels
    positions[r] with row r's leaf * n_trees + tree."""
    kern = lambda name: cb._kernel("level.cu", _LEVEL, name)  # noqa: E731
    n = ell.n_rows
    max_depth = int(params.max_depth)
    cap = 2 ** (max_depth + 1) - 1  # nodes of a full tree
    sp = params.split_params()
    eta = np.float32(params.learning_rate)
    p = (np.float64(sp.reg_lambda), np.float64(sp.reg_alpha), np.float64(sp.min_child_weight),
         np.float64(sp.max_delta_step))
    setup = cb.histogram_setup(ell)
    total_bins = int(ell.cuts.total_bins)
    words = cupy.empty((len(FIELDS) + 1, cap), dtype=cupy.int32)  # level.cu's layout
    state = cupy.empty(4, dtype=cupy.int64)
    k_live = state[1:2]  # level.cu's kCandidates: the nodes split.cu evaluates
    segs = cupy.zeros((cap, 2), dtype=cupy.int64)
    segs[0, 1] = n
    ridx = cupy.arange(n, dtype=cupy.uint32)
    scratch = cupy.empty_like(ridx)
    masks = _level_masks(params, ell.n_features, tree_index)

    # The root: its histogram, sums, node and best split.
    tiles, n_tiles, tile_rows = _root_tiles(ell, setup)
    mark(HISTOGRAM)
    hist = cupy.zeros((1, total_bins, 2), dtype=cupy.int64)
    cb.launch_histograms(ell, gpair, ridx, segs, tiles, n_tiles, tile_rows, hist, setup)
    mark(ALLREDUCE)
    hist = comm.allreduce(hist)
    mark(SPLIT)
    sums = _root_sums(ell, gpair, hist, comm, root_from_bins)
    kern("grow_root")((1,), (1,), (sums, cb._device_scale(scale), *p, eta, np.int64(n), words,
                                   np.int32(cap), state, segs))
    recs, left, right = cb.launch_evaluate(ell.cuts, hist, sums, scale, sp, None if masks is None else masks[0], 1,
                                           k_live)

    part_tiles = -(-n // _PARTITION_TILE_ROWS)
    for depth in range(max_depth):
        k_max = 2**depth  # the level's candidates, at most
        grow_children = depth + 1 < max_depth
        # The inputs of the level's launches, written by expand_level (layouts in the kernels).
        part_info = cupy.empty(2 + 9 * k_max + 1 + part_tiles + k_max, dtype=cupy.int64)
        child_info = cupy.empty(1 + 2 * k_max, dtype=cupy.int64)
        if grow_children:
            # The built children hold about half the level's rows; a split's tiles are counted
            # from its parent's rows (an upper bound), so the grid allows one spare per split.
            tile_rows = setup.tile_rows(max(1, n // 2))
            hist_grid = -(-n // tile_rows) + k_max
            hist_tiles = cupy.empty(4 * (hist_grid + 1), dtype=cupy.int64)
        else:
            tile_rows, hist_grid, hist_tiles = 1, 0, child_info  # not written
        kern("expand_level")((1,), (_PLAN_THREADS,), (
            recs, np.int32(depth), np.int32(grow_children), *p, np.float32(sp.min_split_loss), eta, words,
            np.int32(cap), state, segs, part_info, np.int32(k_max), child_info, hist_tiles, np.int64(tile_rows)))
        n_left = cupy.empty(k_max, dtype=cupy.int64)
        cb.launch_partition(ell, ridx, scratch, part_info, k_max, part_tiles + k_max, segs, n_left)
        if not grow_children:
            break
        mark(HISTOGRAM)
        built = cupy.zeros((k_max, total_bins, 2), dtype=cupy.int64)
        cb.launch_histograms(ell, gpair, ridx, segs, hist_tiles, hist_grid, tile_rows, built, setup)
        mark(ALLREDUCE)
        built = comm.allreduce(built)
        mark(HISTOGRAM)
        children = cupy.empty((2 * k_max, total_bins, 2), dtype=cupy.int64)
        sums = cupy.empty((2 * k_max, 2), dtype=cupy.int64)
        cb.launch_children(hist, built, left, right, child_info, k_max, k_max, children, sums)
        hist = children
        del built
        mark(SPLIT)
        recs, left, right = cb.launch_evaluate(ell.cuts, hist, sums, scale, sp,
                                               None if masks is None else masks[depth + 1], 2 * k_max, k_live)
    del hist

    leaves = 2**max_depth
    chunks = int(min(256, max(1, -(-n // (leaves * _LABEL_ROWS)))))
    kern("label_leaves")((cap, chunks), (256,), (words, np.int32(cap), state, segs, ridx, np.int32(n_trees),
                                                 np.int32(tree), positions))
    mark(OTHER)
    return words


def _host_tree(words: np.ndarray) -> Tree:
    """The Tree of level.cu's device layout (copied to the host)."""
    n_nodes = int(words[-1, 0])
    fields = {}
    for i, (name, dtype) in enumerate(FIELDS.items()):
        row = words[i, :n_nodes]
        fields[name] = row.view(np.float32).copy() if dtype == np.float32 else row.astype(dtype)
    return Tree(**fields)
