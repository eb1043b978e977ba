"""Trees grown on the device, the host waiting once per round (the DEVICE_LEVELS path): depthwise, and lossguide.

growth/host.py keeps the host in the loop: at every level it reads the split records,
decides which nodes split, numbers their children and sizes the next launches. That is
about 0.8 ms of Python and CuPy calls a level, more than the device's work on data of a
few hundred thousand rows, and the device idles while the host catches up. Here
kernels/growth.cu makes those decisions on the device, and the host queues the same
launches for every tree, each sized for the most nodes its level can have (blocks past
the level's real work return at once). Nothing waits until the round's trees are done;
the host then reads them in one copy.

Lossguide trees (grow_lossguide_tree, below) grow one expansion after another the same way:
growth.cu's expand_best pops the best leaf on the device, and the host queues the same
launches for every expansion.

It covers the common cases, which training/plan.py decides (device_levels_refusal): the
depthwise policy with max_depth at most layouts.MAX_DEVICE_DEPTH and no max_leaves, or
lossguide with 0 < max_leaves <= layouts.MAX_DEVICE_LEAVES and no column sampling; no
monotone or interaction constraints, no per-node column sampling, an in-core matrix, and
a communicator whose allreduce stays on the device (one process, or NCCL). A round's trees
(one per class) grow one after another, and the host reads them all at once. growth/host.py
is the reference: tests/stages/test_growth.py checks that both grow the same trees.
"""

from __future__ import annotations

import cupy
import cupyx
import numpy as np

from .. import device_arrays
from ..backend import cupy_backend, kernels
from ..ellpack.cuda import device_plan
from ..feature_sets import ColumnSampler
from ..layouts import (CHILDREN_INFO, GROWTH_STATE, HISTOGRAM_TILE_COLUMNS, LOSSGUIDE_STATE, PARTITION_INFO,
                       PARTITION_TILE_ROWS, SPLIT_DTYPE, TREE_BUFFERS, TREE_FIELDS, kernel_args)
from ..histogram import cuda as histogram
from ..histogram.quantiser import check_finite, quantise
from ..partition import cuda as partition
from ..split import cuda as split
from ..phases import ALLREDUCE, HISTOGRAM, OTHER, SPLIT, mark
from ..tree import Tree

_PLAN_THREADS = 1024
_KERNELS = kernels.declare("growth.cu", (
    "grow_root", "expand_level", "label_leaves", "start_lossguide", "expand_best", "store_children"))
_EXPAND_THREADS = 1024
# Rows a label_leaves block labels, about (its grid is sized by the tree's leaves).
_LABEL_ROWS = 4096


def _level_masks(params, n_features: int, tree_index: int):
    """(max_depth, n_features) uint8 on the device: the features each depth may split on
    (grower's NodeFeatures with no per-node sampling), or None when all may."""
    if params.colsample_bytree == 1.0 and params.colsample_bylevel == 1.0:
        return None
    sampler = ColumnSampler(n_features, params.colsample_bytree, params.colsample_bylevel, 1.0, params.seed,
                            tree_index, params.feature_weights)
    masks = np.zeros((params.max_depth, n_features), dtype=np.uint8)
    for d in range(params.max_depth):
        masks[d, sampler.level_set(d)] = 1
    return cupy.asarray(masks)


def root_sums(ell, gpair, root_hist, comm, from_bins: bool):
    """(1, 2) int64 gradient sums of the root, as grower._root_sums makes them (no host wait)."""
    if from_bins:  # the first feature's bins: every row has a value there
        end = int(device_plan(ell).ptrs_host[1])
        return device_arrays.pair_sums(root_hist[:1], end)[None]
    return comm.allreduce(histogram.sum_gradients(gpair)[None])


def root_tiles(ell, setup):
    """The root's histogram tiles (all rows, one node) on the device, and their tile rows:
    the same for every tree of a matrix, so made once."""
    key = ("_cuda_root_tiles", setup.budget)
    hit = ell.__dict__.get(key)
    if hit is None:
        n = ell.n_rows
        tile_rows = setup.tile_rows(n)
        tiles = histogram.tiles_of(np.array([n], dtype=np.int64), [0], np.zeros(1, dtype=np.int64), tile_rows)
        hit = ell.__dict__[key] = (cupy.asarray(tiles), tiles.shape[0] - 1, tile_rows)
    return hit


def _categories(ell, params):
    """(words of a category set, the categorical rules for split.launch_evaluate) of a tree on
    ell: (0, None) without categorical features."""
    words = split.category_set_words(ell.cuts)
    return (words, (int(params.max_cat_to_onehot), int(params.max_cat_threshold))) if words else (0, None)


def _tree_words(cap: int, set_words: int):
    """A tree's words in growth.cu's layout: its field rows, the count row, and set_words rows of
    category-set words, zero (a node's set is written only where it splits by category)."""
    shape = (len(TREE_FIELDS) + 1 + set_words, cap)
    return cupy.zeros(shape, dtype=cupy.int32) if set_words else cupy.empty(shape, dtype=cupy.int32)


def _grow_root(ell, gpair, scale, p, comm, root_from_bins: bool, setup, ridx, hist, buffers):
    """Both growers' first step, queued: the root's histogram into hist (all rows, summed
    across workers), its gradient sums, and node 0 written by grow_root. Returns (hist, sums)."""
    tiles, n_tiles, tile_rows = root_tiles(ell, setup)
    mark(HISTOGRAM)
    hist.fill(0)
    histogram.launch_histograms(ell, gpair, ridx, buffers["segs"], tiles, n_tiles, tile_rows, hist, setup)
    mark(ALLREDUCE)
    hist = comm.allreduce(hist, out=hist)
    mark(SPLIT)
    sums = root_sums(ell, gpair, hist, comm, root_from_bins)
    kernels.function("growth.cu", _KERNELS, "grow_root")(
        (1,), (1,), (sums, split.device_scale(scale), p, np.int64(ell.n_rows),
                     kernel_args(TREE_BUFFERS, part_info=None, child_info=None, hist_tiles=None, tile_rows=0,
                                 part_stride=0, category_sets=None, **buffers)))
    return hist, sums


def grow_forest(ell, gpair, scale, params, comm, root_from_bins: bool, tree_indices=(0,)):
    """The round's trees, tree c from gpair[c * n:(c + 1) * n] (n = ell.n_rows): (trees, the
    leaf of every virtual row), as growth/host.py's grow_forest returns them: tree c's leaf of row r is
    positions[c * n + r] // K. scale: on the host or the device (prepare_gradients(wait=False),
    whose gradients are checked for NaN once the trees are read)."""
    forest = queue_forest(ell, gpair, scale, params, comm, root_from_bins, tree_indices)
    return forest.trees(), forest.positions


def queue_forest(ell, gpair, scale, params, comm, root_from_bins: bool, tree_indices=(0,)) -> "QueuedForest":
    """grow_forest's trees queued on the device, nothing waited for: the host may queue the
    next round (whose gradients need only QueuedForest.add_to's margins) before it reads
    these trees with QueuedForest.trees()."""
    words, positions = queue_trees(ell, gpair, scale, params, comm, root_from_bins, tree_indices)
    return QueuedForest(words, positions, getattr(gpair, "abs_sum", None))


def queue_trees(ell, gpair, scale, params, comm, root_from_bins: bool, tree_indices):
    """(words (K, len(TREE_FIELDS) + 1, cap), positions (K * n,)) of the round's K trees, queued."""
    tree_indices = list(tree_indices)
    k, n = len(tree_indices), ell.n_rows
    positions = cupy.empty(k * n, dtype=cupy.int32)
    grow = grow_lossguide_tree if params.grow_policy == "lossguide" else grow_tree
    words = [grow(ell, gpair[c * n : (c + 1) * n], scale, params, comm, root_from_bins, t,
                  positions[c * n : (c + 1) * n], k, c)
             for c, t in enumerate(tree_indices)]
    return (words[0][None] if k == 1 else device_arrays.stack(words)), positions


def fixed_gradients(gpair, comm):
    """The round's float gradient pairs quantised (histogram/quantiser.py) without waiting for
    the scale: the kernels read it on the device."""
    return quantise(cupy_backend, cupy.ascontiguousarray(gpair, dtype=cupy.float32), comm, wait=False)


_VALUE_ROW = TREE_FIELDS.index("value")


class QueuedForest:
    """A round's trees in growth.cu's layout on the device, copied to page-locked host memory
    by the stream as soon as they are grown: trees() waits for that copy and for nothing
    queued after it, so the device can grow the next round while the host reads these."""

    def __init__(self, words, positions, sums):
        self.words, self.positions = words, positions  # words: (K, len(TREE_FIELDS) + 1, cap) int32
        self._host = cupy.asnumpy(words, out=cupyx.empty_pinned(words.shape, words.dtype), blocking=False)
        # The sums the fixed-point scale was sized by (None: checked already): read with the
        # trees, to check for NaN.
        self._sums = None if sums is None else cupy.asnumpy(
            sums, out=cupyx.empty_pinned(sums.shape, sums.dtype), blocking=False)
        self._copied = cupy.cuda.Event(disable_timing=True)
        self._copied.record()

    def add_to(self, margin) -> None:
        """Move each row's margin (margin[:, c] for tree c; (n,) for one tree) by its leaf's
        value, on the device: the float32 additions _grow_round makes from the host trees.
        Then forgets the device arrays (a CUDA graph's next replay writes them again)."""
        k = self.words.shape[0]
        n = self.positions.size // k
        for c in range(k):
            leaves = self.positions[c * n : (c + 1) * n]
            if margin.dtype == cupy.float32 and margin.flags.c_contiguous:  # a kernel: nothing to compile
                device_arrays.add_leaf_values(margin, c, self.words[c, _VALUE_ROW], leaves, k)
                continue
            column = margin if margin.ndim == 1 else margin[:, c]
            column[...] += self.words[c, _VALUE_ROW].view(cupy.float32)[leaves // k if k > 1 else leaves]
        self.words = self.positions = None

    def trees(self) -> list[Tree]:
        """The host Trees (waits for this round's copy only); NaN gradients raise here."""
        self._copied.synchronize()
        if self._sums is not None:
            check_finite(self._sums)
        return [Tree.from_words(h) for h in self._host]


class _HistogramArena:
    """A tree's level histograms, as views of one buffer: level d reads its nodes' histograms
    (hist, 2^d nodes), builds the smaller children's (built, 2^d) and writes all children's
    (children, 2^(d+1)), which are level d + 1's hist. hist and built sit at one end of the
    buffer and children at the other, the ends alternating with the level, so the three never
    overlap and the buffer needs 2^max_depth nodes (4 x 2^d at the last level that builds):
    the most the level histograms ever hold at once. Allocated level by level instead, each
    size is a block of its own that a memory pool cannot hand to the next, larger level: a
    CUDA graph's pool then keeps every level's blocks (about 1.5 x this buffer at depth 8)."""

    def __init__(self, max_depth: int, total_bins: int):
        self.nodes = 2 ** max_depth if max_depth >= 2 else 1
        self.buf = cupy.empty((self.nodes, total_bins, 2), dtype=cupy.int64)

    def _front(self, depth: int) -> bool:  # whether level depth's hist is at the buffer's front
        return depth % 2 == 0

    def hist(self, depth: int):
        k = 2**depth
        return self.buf[:k] if self._front(depth) else self.buf[self.nodes - k:]

    def built(self, depth: int):
        k = 2**depth
        return self.buf[k : 2 * k] if self._front(depth) else self.buf[self.nodes - 2 * k : self.nodes - k]

    def children(self, depth: int):
        k = 2 ** (depth + 1)
        return self.buf[self.nodes - k:] if self._front(depth) else self.buf[:k]


def grow_tree(ell, gpair, scale, params, comm, root_from_bins: bool, tree_index: int, positions, n_trees: int = 1,
              tree: int = 0):
    """One depthwise tree from the FixedGradients gpair, queued on the device: returns its
    words in growth.cu's layout (layouts.TREE_FIELDS rows; a device array, Tree.from_words reads
    them) and labels positions[r] with row r's leaf * n_trees + tree."""
    kern = lambda name: kernels.function("growth.cu", _KERNELS, name)  # noqa: E731
    n = ell.n_rows
    max_depth = int(params.max_depth)
    cap = 2 ** (max_depth + 1) - 1  # nodes of a full tree
    sp = params.split_params()
    p = split.split_params_args(sp, params.learning_rate)
    setup = histogram.histogram_setup(ell)
    total_bins = int(ell.cuts.total_bins)
    set_words, categorical = _categories(ell, params)
    words = _tree_words(cap, set_words)
    state = cupy.empty(len(GROWTH_STATE), dtype=cupy.int64)
    candidates = GROWTH_STATE.index("candidates")
    k_live = state[candidates : candidates + 1]  # the nodes split.cu evaluates
    segs = cupy.zeros((cap, 2), dtype=cupy.int64)
    device_arrays.fill(segs[0, 1:], n)
    ridx = device_arrays.arange(n, cupy.uint32)
    scratch = cupy.empty_like(ridx)
    masks = _level_masks(params, ell.n_features, tree_index)

    arena = _HistogramArena(max_depth, total_bins)

    # The root: its histogram, sums, node and best split.
    buffers = dict(tree=words, state=state, segs=segs, cap=cap, category_words=set_words)
    hist, sums = _grow_root(ell, gpair, scale, p, comm, root_from_bins, setup, ridx, arena.hist(0), buffers)
    recs, left, right, sets = split.launch_evaluate(ell.cuts, hist, sums, scale, sp,
                                                    None if masks is None else masks[0], 1, k_live, categorical)

    part_tiles = -(-n // PARTITION_TILE_ROWS)
    for depth in range(max_depth):
        k_max = 2**depth  # the level's candidates, at most
        grow_children = depth + 1 < max_depth
        # The inputs of the level's launches, written by expand_level (layouts.py).
        part_info = cupy.empty(PARTITION_INFO.size(k_max, part_tiles + k_max), dtype=cupy.int64)
        child_info = cupy.empty(CHILDREN_INFO.size(k_max), dtype=cupy.int64)
        if grow_children:
            # The built children hold about half the level's rows; a split's tiles are counted
            # from its parent's rows (an upper bound), so the grid allows one spare per split.
            tile_rows = setup.tile_rows(max(1, n // 2))
            hist_grid = -(-n // tile_rows) + k_max
            hist_tiles = cupy.empty(len(HISTOGRAM_TILE_COLUMNS) * (hist_grid + 1), dtype=cupy.int64)
        else:
            tile_rows, hist_grid, hist_tiles = 1, 0, child_info  # not written
        level = kernel_args(TREE_BUFFERS, part_info=part_info, child_info=child_info, hist_tiles=hist_tiles,
                            tile_rows=tile_rows, part_stride=k_max, category_sets=sets, **buffers)
        kern("expand_level")((1,), (_PLAN_THREADS,), (recs, np.int32(depth), np.int32(grow_children), p, level))
        n_left = cupy.empty(k_max, dtype=cupy.int64)
        partition.launch_partition(ell, ridx, scratch, part_info, k_max, part_tiles + k_max, segs, n_left, sets)
        if not grow_children:
            break
        mark(HISTOGRAM)
        built = arena.built(depth)
        built.fill(0)
        histogram.launch_histograms(ell, gpair, ridx, segs, hist_tiles, hist_grid, tile_rows, built, setup)
        mark(ALLREDUCE)
        built = comm.allreduce(built, out=built)
        mark(HISTOGRAM)
        children = arena.children(depth)
        sums = cupy.empty((2 * k_max, 2), dtype=cupy.int64)
        histogram.launch_children(hist, built, left, right, child_info, k_max, k_max, children, sums)
        hist = children
        del built
        mark(SPLIT)
        recs, left, right, sets = split.launch_evaluate(ell.cuts, hist, sums, scale, sp,
                                                        None if masks is None else masks[depth + 1], 2 * k_max,
                                                        k_live, categorical)
    del hist, arena

    leaves = 2**max_depth
    chunks = int(min(256, max(1, -(-n // (leaves * _LABEL_ROWS)))))
    kern("label_leaves")((cap, chunks), (256,), (level, ridx, np.int32(n_trees), np.int32(tree), positions))
    mark(OTHER)
    return words


# ---------------------------------------------------------------------------- lossguide
def grow_lossguide_tree(ell, gpair, scale, params, comm, root_from_bins: bool, tree_index: int, positions,
                        n_trees: int = 1, tree: int = 0):
    """One lossguide tree from the FixedGradients gpair, queued on the device: max_leaves - 1
    expansions, each the same launches (kernels/growth.cu's lossguide section says what each
    does). Returns its words and labels positions as grow_tree does."""
    kern = lambda name: kernels.function("growth.cu", _KERNELS, name)  # noqa: E731
    n = ell.n_rows
    max_leaves, max_depth = int(params.max_leaves), int(params.max_depth)
    cap = 2 * max_leaves - 1  # nodes of a tree of max_leaves leaves
    sp = params.split_params()
    p = split.split_params_args(sp, params.learning_rate)
    setup = histogram.histogram_setup(ell)
    total_bins = int(ell.cuts.total_bins)
    row_len = 2 * total_bins
    set_words, categorical = _categories(ell, params)
    words = _tree_words(cap, set_words)
    state = cupy.empty(len(GROWTH_STATE), dtype=cupy.int64)
    candidates = GROWTH_STATE.index("candidates")
    k_live = state[candidates : candidates + 1]  # the children split.cu scores: 0 or 2
    lg = cupy.empty(len(LOSSGUIDE_STATE), dtype=cupy.int64)
    segs = cupy.zeros((cap, 2), dtype=cupy.int64)
    device_arrays.fill(segs[0, 1:], n)
    ridx = device_arrays.arange(n, cupy.uint32)
    scratch = cupy.empty_like(ridx)
    n_left = cupy.empty(1, dtype=cupy.int64)
    recs = cupy.empty(cap * SPLIT_DTYPE.itemsize, dtype=cupy.uint8)  # SplitRecord by node id
    queued = cupy.zeros(cap, dtype=cupy.int32)
    slot_of = cupy.empty(cap, dtype=cupy.int32)
    slots = cupy.empty((max_leaves, total_bins, 2), dtype=cupy.int64)  # an open leaf's histogram each
    slot_left = cupy.empty((max_leaves, 2), dtype=cupy.int64)
    slot_right = cupy.empty((max_leaves, 2), dtype=cupy.int64)
    built = cupy.empty((1, total_bins, 2), dtype=cupy.int64)
    children = cupy.empty((2, total_bins, 2), dtype=cupy.int64)
    child_sums = cupy.empty((2, 2), dtype=cupy.int64)

    # A scored leaf's category set, by node id, until it is split (growth.cu expand_best).
    node_sets = cupy.empty((cap, max(set_words, 1)), dtype=cupy.uint32)

    # The root: its histogram (slot 0), sums, node and best split.
    buffers = dict(tree=words, state=state, segs=segs, cap=cap, category_words=set_words)
    root, sums = _grow_root(ell, gpair, scale, p, comm, root_from_bins, setup, ridx, slots[:1], buffers)
    kern("start_lossguide")((1,), (1,), (lg, slot_of))
    scored, scored_left, scored_right, scored_sets = split.launch_evaluate(ell.cuts, root, sums, scale, sp, None, 1,
                                                                           categorical=categorical)

    # Every expansion's launches, sized for a leaf of all rows.
    part_tiles = -(-n // PARTITION_TILE_ROWS)
    part_info = cupy.empty(PARTITION_INFO.size(1, part_tiles + 1), dtype=cupy.int64)
    child_info = cupy.empty(CHILDREN_INFO.size(1), dtype=cupy.int64)
    tile_rows = setup.tile_rows(max(1, n // 2))
    hist_grid = -(-n // tile_rows) + 1
    hist_tiles = cupy.empty(len(HISTOGRAM_TILE_COLUMNS) * (hist_grid + 1), dtype=cupy.int64)
    level = kernel_args(TREE_BUFFERS, part_info=part_info, child_info=child_info, hist_tiles=hist_tiles,
                        tile_rows=tile_rows, part_stride=1, category_sets=node_sets, **buffers)
    expand_best, store_children = kern("expand_best"), kern("store_children")
    limits = (np.int32(max_depth), np.int32(max_leaves))
    for _ in range(max_leaves - 1):
        mark(SPLIT)
        expand_best((1,), (_EXPAND_THREADS,), (scored, scored_left, scored_right,
                                               node_sets if scored_sets is None else scored_sets, recs, queued,
                                               slot_left, slot_right, slot_of, lg, *limits, p, level))
        partition.launch_partition(ell, ridx, scratch, part_info, 1, part_tiles + 1, segs, n_left,
                                   node_sets if set_words else None)
        mark(HISTOGRAM)
        built.fill(0)
        histogram.launch_histograms(ell, gpair, ridx, segs, hist_tiles, hist_grid, tile_rows, built, setup)
        mark(ALLREDUCE)
        built = comm.allreduce(built, out=built)
        mark(HISTOGRAM)
        histogram.launch_children(slots, built, slot_left, slot_right, child_info, 1, 1, children, child_sums)
        kernels.launch_1d(store_children, 2 * row_len, (children, slots, slot_of, lg, np.int64(row_len)))
        mark(SPLIT)
        scored, scored_left, scored_right, scored_sets = split.launch_evaluate(
            ell.cuts, children, child_sums, scale, sp, None, 2, k_live, categorical)

    chunks = int(min(256, max(1, -(-n // (max_leaves * _LABEL_ROWS)))))
    kern("label_leaves")((cap, chunks), (256,), (level, ridx, np.int32(n_trees), np.int32(tree), positions))
    mark(OTHER)
    return words
