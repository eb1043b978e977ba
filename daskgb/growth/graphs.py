"""A fit's rounds as CUDA graphs (the CUDA_GRAPHS path): each round's launches captured once and replayed."""

from __future__ import annotations

import warnings

import cupy
import numpy as np

from .. import phases
from ..backend import cupy_backend
from ..split.cuda import forget_split_counters, split_counters
from . import device
from .device import QueuedForest, fixed_gradients


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
    (NCCL supports stream capture); the watchdog then watches each replay as one call. A
    phase clock's marks (the Dask dashboard) are captured as stamps of the device's timer,
    which each replay writes (phases.recording()).
    training/plan.py plans this path only where no tree draws columns of its own
    (colsample_bytree and colsample_bylevel 1): a graph replays one set of launches. A
    capture failure takes queue_forest, launch by launch (remembered for the run, with a
    warning; the path taken then reads queued-rounds). enabled=False queues every round
    launch by launch (the QUEUED_ROUNDS path). close() frees the graphs and their memory.
    """

    def __init__(self, enabled: bool = True):
        self._graphs: dict = {}
        self._seen: set = set()
        self.failure: str | None = None if enabled else "off"

    def values_of(self, n_values: int):
        """The gradient pairs ((n_values, 2)) a captured graph reads, or None before any is."""
        for graph in self._graphs.values():
            if graph.values.shape[0] == n_values:
                return graph.values
        return None

    def queue(self, ell, gpair, params, comm, root_from_bins: bool, tree_indices) -> "QueuedForest":
        """The round's trees from its float gradient pairs ((K * n, 2)), queued (QueuedForest)."""
        tree_indices = list(tree_indices)
        key = self._key(ell, gpair, params, comm, root_from_bins, len(tree_indices))
        graph = None if key is None else self._graphs.get(key)
        if graph is None and key is not None and key in self._seen:
            # The rounds before, launched one by one, leave blocks in CuPy's pool sized for their
            # transient arrays; the graph's arrays come from a pool of its own. Held both, the
            # device would keep those blocks through every replay.
            cupy_backend.release_cached_memory()
            try:
                graph = self._graphs[key] = _ForestGraph(ell, gpair, params, comm, root_from_bins, tree_indices)
            except Exception as exc:  # launches one by one do the same work, only slower
                self.failure = f"{type(exc).__name__}: {exc}"
                warnings.warn(f"daskgb: a round's launches could not be captured as a CUDA graph ({self.failure}); "
                              "training goes on launching them one by one (slower, same trees)", RuntimeWarning,
                              stacklevel=2)
        if graph is None:
            if key is not None:
                self._seen.add(key)
            fixed, scale = fixed_gradients(gpair, comm)
            return device.queue_forest(ell, fixed, scale, params, comm, root_from_bins, tree_indices)
        words, positions, sums = graph.launch(gpair)
        comm.track("a round's NCCL allreduces (one CUDA graph)")  # NCCL's watchdog: the replay as one call
        return QueuedForest(words, positions, sums)

    def _key(self, ell, gpair, params, comm, root_from_bins, n_trees):
        """What a round's launches depend on, or None where no graph is made."""
        if self.failure is not None:
            return None
        sp = params.split_params()
        # A phase clock's marks are captured as stamps: a graph made without one has none.
        return (id(ell), id(comm), phases.clock_running(), params.grow_policy, int(params.max_depth),
                int(params.max_leaves), n_trees, bool(root_from_bins), tuple(gpair.shape),
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

    def __init__(self, ell, gpair, params, comm, root_from_bins: bool, tree_indices):
        self.pool = cupy.cuda.MemoryPool()
        _GRAPH_POOLS[id(self)] = self.pool
        self.stream = cupy.cuda.Stream(non_blocking=True)
        self.graph = self.comm = None
        # The split kernel's block counters for this stream, made before the capture (a
        # capture would record their zeroing, not do it) and outside the graph's pool.
        with self.stream:
            split_counters(2 ** int(params.max_depth) if params.grow_policy == "depthwise" else 2)
        # The graph reads its gradient pairs from the capturing round's own array, kept: later
        # rounds write theirs there (ForestGraphs.values_of) or, if they cannot, are copied in.
        self.values = gpair if gpair.dtype == cupy.float32 and gpair.flags.c_contiguous else \
            cupy.ascontiguousarray(gpair, dtype=cupy.float32)
        with cupy.cuda.using_allocator(self.pool.malloc), self.stream:
            self.stream.synchronize()
            # The communicator counts the NCCL calls it makes: a capture makes none, each replay all.
            counted = (_calls(comm), _bytes(comm))
            self.stream.begin_capture()
            try:
                with phases.recording() as self.stamps:
                    fixed, scale = fixed_gradients(self.values, comm)
                    self.sums = fixed.abs_sum
                    self.words, self.positions = device.queue_trees(ell, fixed, scale, params, comm,
                                                                    root_from_bins, tree_indices)
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
        if gpair.data.ptr != self.values.data.ptr:
            self.values[...] = gpair
        self.graph.launch(stream=cupy.cuda.get_current_stream())
        phases.splice(self.stamps)  # the phase clock's stamps the replay writes, in its lap
        if self.calls:
            self.comm.nccl_allreduce_calls += self.calls
            self.comm.nccl_allreduce_bytes += self.bytes
        return self.words, self.positions, self.sums

    def close(self) -> None:
        self.graph = self.comm = self.stamps = None
        self.words = self.positions = self.values = self.sums = None
        forget_split_counters(self.stream)
        self.pool.free_all_blocks()
        _GRAPH_POOLS.pop(id(self), None)
