"""The CUDA backend: every stage's cuda.py, the CuPy launchers of kernels/*.cu.

It satisfies backend/contract.py with the same names, arguments and results as
backend/numpy_backend.py, the reference; tests/stages/ run both on the same input and
compare. Arrays come and go as CuPy arrays, except the small per-level split arrays of
apply_splits and the packed trees of predict_margin, which are host numpy arrays. A host
level makes one host wait: the split records of evaluate_splits; apply_splits and
build_histograms queue their work without waiting (partition/cuda.py RowPartition says how
the children's row counts reach the host behind the launches).
"""

from __future__ import annotations

import cupy
import numpy as np

from ..ellpack.cuda import (PageCopies, count_missing, csr_symbols, gather_rows, host_copy, longest_present_row,
                            pack_csr, pack_dense, pack_dense_sparse, pack_symbols, present_counts, unpack_symbols)
from ..explain.cuda import leaf_indices, saabas_contributions, shap_contributions, shap_interactions
from ..histogram.cuda import (build_histograms, children_histograms, gradient_abs_sums, prepare_gradients,
                              sum_gradients)
from ..partition.cuda import apply_splits, new_partition
from ..phases import CudaPhaseClock
from .contract import offered_names
from ..predict.cuda import add_leaf_values, predict_margin
from ..sampling.cuda import mvs_apply, mvs_rows
from ..sketch import cuda as _sketch_cuda
from ..sketch import reference as _sketch
from ..split.cuda import evaluate_categorical, evaluate_splits

name = "cuda"
xp = cupy
# Histograms sum int64 fixed point (histogram/quantiser.py): exact in any order of atomic adds.
histogram_dtype = np.dtype(np.int64)
# growth/device.py grows depthwise trees on the device (training/plan.py decides when).
grows_on_device = True
# Categorical splits: categorical.cu evaluates them, partition.cu and predict.cu route rows by them.
splits_by_category = True


def to_device(a):
    """A host array on the device. (Staging through a ring of pinned buffers, to make these small
    per-level copies asynchronous, was measured and gained nothing: see docs/performance_notes.md.)"""
    return cupy.asarray(a)


def set_threads(n: int | None) -> None:
    """Nothing: the device's kernels do not run on host threads."""


def free_device_memory() -> int:
    """The current device's free bytes: a matrix without a budget pages itself by them."""
    free, _ = cupy.cuda.runtime.memGetInfo()
    return int(free)


def release_cached_memory() -> None:
    """Return the blocks CuPy's default pool keeps cached to the device. Called where a step's
    working memory is done with (a matrix built; training's first round, before its rounds are
    captured): the pool would keep those blocks, sized for that step, through training, whose
    arrays have other sizes and so get blocks of their own -- the device would hold both (1.2 GiB
    of quantising's on a 1.07M x 968 matrix that itself takes 1.1). Blocks of a pool the user set
    in CuPy's place (RMM) are the user's to manage: that pool is left alone."""
    pool = cupy.get_default_memory_pool()
    if cupy.cuda.get_allocator() == pool.malloc:
        pool.free_all_blocks()


def phase_clock() -> CudaPhaseClock:
    """Device time per phase, from stamps of the device's timer (no host wait inside a round)."""
    return CudaPhaseClock()


def page_copies() -> PageCopies:
    """A stream of host pages to this device, each next page's copy started ahead (ellpack/pages.py)."""
    return PageCopies()


def summarize_dense(block, missing: float, budget):
    """sketch/cuda.py's kernels: a dense block's keys sorted once, its summaries read off their runs."""
    return _sketch_cuda.summarize_dense(block, missing, budget)


def segmented_searchsorted(a, lo, hi, v, max_width: int, right: bool):
    """sketch/cuda.py's kernel for float64 ranks (a thread a query), else sketch/reference.py's steps."""
    if a.dtype == cupy.float64 and v.dtype == cupy.float64:
        return _sketch_cuda.segmented_searchsorted(a, lo, hi, v, right)
    return _sketch.segmented_searchsorted(cupy, a, lo, hi, v, max_width, right)


__all__ = offered_names()
