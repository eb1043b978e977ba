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

import os
import warnings

import cupy
import cupyx
import numpy as np

from ..collective import NcclCommunicator
from ..feature_sets import ColumnSampler
from ..phases import ALLREDUCE, HISTOGRAM, OTHER, SPLIT, mark
from ..tree import FIELDS, Tree
from . import cupy_backend as cb

# False: every tree takes grower.grow_forest (for comparisons).
ENABLED = True
# Off (DASKGB_CUDA_GRAPHS=0): queued rounds are launched call by call, never as CUDA graphs.
GRAPHS = os.environ.get("DASKGB_CUDA_GRAPHS", "1") != "0"
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
    forest = queue_forest(ell, gpair, scale, params, comm, root_from_bins, tree_indices)
    return forest.trees(), forest.positions


def queue_forest(ell, gpair, scale, params, comm, root_from_bins: bool, tree_indices=(0,)) -> "QueuedForest":
    """grow_forest's trees queued on the device, nothing waited for: the host may queue the
    next round (whose gradients need only QueuedForest.add_to's margins) before it reads
    these trees with QueuedForest.trees()."""
    words, positions = _queue_trees(ell, gpair, scale, params, comm, root_from_bins, tree_indices)
    return QueuedForest(words, positions, getattr(gpair, "abs_sum", None))


def _queue_trees(ell, gpair, scale, params, comm, root_from_bins: bool, tree_indices):
    """(words (K, len(FIELDS) + 1, cap), positions (K * n,)) of the round's K trees, queued."""
    tree_indices = list(tree_indices)
    k, n = len(tree_indices), ell.n_rows
    positions = cupy.empty(k * n, dtype=cupy.int32)
    words = [grow_tree(ell, gpair[c * n : (c + 1) * n], scale, params, comm, root_from_bins, t,
                       positions[c * n : (c + 1) * n], k, c)
             for c, t in enumerate(tree_indices)]
    return (words[0][None] if k == 1 else cupy.stack(words)), positions


def fixed_gradients(gpair, comm):
    """prepare_gradients(wait=False) of the round's float gradient pairs, with the scale every
    worker shares (sized by the |g| and |h| sums of all workers' rows, allreduced on the device)."""
    g = cupy.ascontiguousarray(gpair, dtype=cupy.float32)
    abs_sum = None
    if comm.world_size > 1:
        abs_sum = cb.gradient_abs_sums(g)
        mark(ALLREDUCE)
        abs_sum = comm.allreduce(abs_sum)
        mark(OTHER)
    return cb.prepare_gradients(g, abs_sum=abs_sum, wait=False)


class ForestGraphs:
    """A training run's rounds as CUDA graphs: the launches of a round's trees (about 20 a
    level, each ~25 us of host time, on data whose level takes the device less) captured
    once and replayed each round with one launch, so that the host stays ahead of the device
    and, on several GPUs, no rank's host delays the others' collectives.

    A round's launches depend only on the matrix, the tree parameters and the number of trees
    (every launch is sized for the most nodes its level can have), so one graph serves every
    round with the same ones. It starts from the round's float gradient pairs, copied into a
    buffer the graph reads: the fixed-point scale (the |g|, |h| sums, their allreduce, the
    scale) is part of the graph, so a round makes no NCCL call of its own. Its outputs (the
    trees' words, the rows' leaves, the sums) are read before the next replay overwrites them
    (QueuedForest copies the words and sums in stream order; the margins move in stream
    order). The first round with given parameters runs launch by launch (it compiles the
    kernels and fills the caches the capture must find full); the second is captured.
    Everything the graph touches is allocated from a memory pool of its own, so no array
    outside the graph is ever given memory a replay writes. NCCL calls are captured too
    (NCCL supports stream capture); the watchdog then watches each replay as one call.
    Per-level column sampling and any capture failure take queue_forest, launch by launch
    (a failure is remembered for the run, with a warning). close() frees the graphs and
    their memory.
    """

    def __init__(self, enabled: bool | None = None):
        self._graphs: dict = {}
        self._seen: set = set()
        self.failure: str | None = None if (GRAPHS if enabled is None else enabled) else "off"

    def queue(self, ell, gpair, params, comm, root_from_bins: bool, tree_indices) -> "QueuedForest":
        """The round's trees from its float gradient pairs ((K * n, 2)), queued (QueuedForest)."""
        tree_indices = list(tree_indices)
        key = self._key(ell, gpair, params, comm, root_from_bins, len(tree_indices))
        graph = None if key is None else self._graphs.get(key)
        if graph is None and key is not None and key in self._seen:
            try:
                graph = self._graphs[key] = _ForestGraph(ell, gpair.shape[0], params, comm, root_from_bins,
                                                         tree_indices)
            except Exception as exc:  # launches one by one do the same work, only slower
                self.failure = f"{type(exc).__name__}: {exc}"
                warnings.warn(f"daskgb: a round's launches could not be captured as a CUDA graph ({self.failure}); "
                              "training goes on launching them one by one (slower, same trees)", RuntimeWarning,
                              stacklevel=2)
        if graph is None:
            if key is not None:
                self._seen.add(key)
            fixed, scale = fixed_gradients(gpair, comm)
            return queue_forest(ell, fixed, scale, params, comm, root_from_bins, tree_indices)
        words, positions, sums = graph.launch(gpair)
        if isinstance(comm, NcclCommunicator):
            comm.track("a round's NCCL allreduces (one CUDA graph)")
        return QueuedForest(words, positions, sums)

    def _key(self, ell, gpair, params, comm, root_from_bins, n_trees):
        """What a round's launches depend on, or None where no graph is made."""
        if self.failure is not None or params.colsample_bytree != 1.0 or params.colsample_bylevel != 1.0:
            return None
        sp = params.split_params()
        return (id(ell), id(comm), int(params.max_depth), n_trees, bool(root_from_bins), tuple(gpair.shape),
                float(sp.reg_lambda), float(sp.reg_alpha), float(sp.min_child_weight), float(sp.max_delta_step),
                float(sp.min_split_loss), float(np.float32(params.learning_rate)))

    def close(self) -> None:
        for graph in self._graphs.values():
            graph.close()
        self._graphs.clear()


# The memory pools of the graphs alive in this process (by graph id): their blocks are the
# graphs' own, outside CuPy's default pool, so memory figures add graph_memory_bytes().
_GRAPH_POOLS: dict = {}


def graph_memory_bytes() -> int:
    """Device bytes the live CUDA graphs of training hold (all their pools' blocks: a block
    free in a pool is still written by the replays that captured it)."""
    return sum(pool.total_bytes() for pool in list(_GRAPH_POOLS.values()))


def _calls(comm) -> int:
    return getattr(comm, "nccl_allreduce_calls", 0)


def _bytes(comm) -> int:
    return getattr(comm, "nccl_allreduce_bytes", 0)


class _ForestGraph:
    """One captured round (see ForestGraphs)."""

    def __init__(self, ell, n_values: int, params, comm, root_from_bins: bool, tree_indices):
        self.pool = cupy.cuda.MemoryPool()
        _GRAPH_POOLS[id(self)] = self.pool
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.graph = self.comm = None
        # The split kernel's block counters for this stream, made before the capture (a
        # capture would record their zeroing, not do it) and outside the graph's pool.
        with self.stream:
            cb._split_counters(2 ** int(params.max_depth))
        with cupy.cuda.using_allocator(self.pool.malloc), self.stream:
            self.values = cupy.empty((n_values, 2), dtype=cupy.float32)
            self.stream.synchronize()
            # The communicator counts the NCCL calls it makes: a capture makes none, each replay all.
            counted = (_calls(comm), _bytes(comm))
            self.stream.begin_capture()
            try:
                fixed, scale = fixed_gradients(self.values, comm)
                self.sums = fixed.abs_sum
                self.words, self.positions = _queue_trees(ell, fixed, scale, params, comm, root_from_bins,
                                                          tree_indices)
            except BaseException:
                try:
                    self.stream.end_capture()
                except Exception:
                    pass
                self.close()
                raise
            self.graph = self.stream.end_capture()
        self.comm, self.calls, self.bytes = comm, _calls(comm) - counted[0], _bytes(comm) - counted[1]
        if self.calls:
            comm.nccl_allreduce_calls, comm.nccl_allreduce_bytes = counted

    def launch(self, gpair):
        """Replay on the current stream from this round's float gradient pairs: (words,
        positions, the |g|, |h| sums its scale was sized by)."""
        self.values[...] = gpair
        self.graph.launch(stream=cupy.cuda.get_current_stream())
        if self.calls:
            self.comm.nccl_allreduce_calls += self.calls
            self.comm.nccl_allreduce_bytes += self.bytes
        return self.words, self.positions, self.sums

    def close(self) -> None:
        self.graph = self.comm = None
        self.words = self.positions = self.values = self.sums = None
        cb._forget_split_counters(self.stream)
        self.pool.free_all_blocks()
        _GRAPH_POOLS.pop(id(self), None)


_VALUE_ROW = list(FIELDS).index("value")


class QueuedForest:
    """A round's trees in level.cu's layout on the device, copied to page-locked host memory
    by the stream as soon as they are grown: trees() waits for that copy and for nothing
    queued after it, so the device can grow the next round while the host reads these."""

    def __init__(self, words, positions, sums):
        self.words, self.positions = words, positions  # words: (K, len(FIELDS) + 1, cap) int32
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
        values = self.words[:, _VALUE_ROW].view(cupy.float32)
        for c in range(k):
            leaves = self.positions[c * n : (c + 1) * n]
            column = margin if margin.ndim == 1 else margin[:, c]
            column[...] += values[c][leaves // k if k > 1 else leaves]
        self.words = self.positions = None

    def trees(self) -> list[Tree]:
        """The host Trees (waits for this round's copy only); NaN gradients raise here."""
        self._copied.synchronize()
        if self._sums is not None:
            cb._check_finite(self._sums)
        return [_host_tree(h) for h in self._host]


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

    arena = _HistogramArena(max_depth, total_bins)

    # The root: its histogram, sums, node and best split.
    tiles, n_tiles, tile_rows = _root_tiles(ell, setup)
    mark(HISTOGRAM)
    hist = arena.hist(0)
    hist.fill(0)
    cb.launch_histograms(ell, gpair, ridx, segs, tiles, n_tiles, tile_rows, hist, setup)
    mark(ALLREDUCE)
    hist = comm.allreduce(hist, out=hist)
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
        built = arena.built(depth)
        built.fill(0)
        cb.launch_histograms(ell, gpair, ridx, segs, hist_tiles, hist_grid, tile_rows, built, setup)
        mark(ALLREDUCE)
        built = comm.allreduce(built, out=built)
        mark(HISTOGRAM)
        children = arena.children(depth)
        sums = cupy.empty((2 * k_max, 2), dtype=cupy.int64)
        cb.launch_children(hist, built, left, right, child_info, k_max, k_max, children, sums)
        hist = children
        del built
        mark(SPLIT)
        recs, left, right = cb.launch_evaluate(ell.cuts, hist, sums, scale, sp,
                                               None if masks is None else masks[depth + 1], 2 * k_max, k_live)
    del hist, arena

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
