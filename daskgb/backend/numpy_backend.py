"""The numpy backend: every stage's reference.py, the readable oracle of each hot loop and what CPU workers run.

It satisfies backend/contract.py by naming the stages' numpy functions; backend/cupy_backend.py
names their CUDA launchers. tests/stages/ run both on the same random input and compare.
"""

from __future__ import annotations

import numpy as np

from ..ellpack.reference import (HostPages, count_missing, csr_symbols, gather_rows, host_copy, longest_present_row,
                                 pack_csr, pack_dense, pack_dense_sparse, pack_symbols, present_counts, unpack_symbols)
from ..explain.reference import leaf_indices, saabas_contributions, shap_contributions, shap_interactions
from ..histogram.reference import (build_histograms, children_histograms, gradient_abs_sums, prepare_gradients,
                                   sum_gradients)
from ..partition.reference import apply_splits, new_partition
from ..phases import PhaseClock
from .contract import offered_names
from ..predict.reference import add_leaf_values, predict_margin
from ..sampling.reference import mvs_apply, mvs_rows
from ..sketch import reference as _sketch
from ..split.reference import evaluate_categorical
from ..split.reference import evaluate_splits_grouped as evaluate_splits

name = "cpu"
xp = np
# Histograms sum float64 in row order, as XGBoost's single-threaded CPU builder does.
histogram_dtype = np.dtype(np.float64)
# Every tree grows by host levels (growth/host.py).
grows_on_device = False
splits_by_category = True


def to_device(a):
    """A host array on this backend's device: the host itself."""
    return np.asarray(a)


def free_device_memory() -> None:
    """None: the rows live in host memory, which a matrix does not page itself out of."""
    return None


def release_cached_memory() -> None:
    """Nothing: numpy returns freed memory to the host's allocator itself."""


def phase_clock() -> PhaseClock:
    """Host time per phase."""
    return PhaseClock()


def set_threads(n: int | None) -> None:
    """Nothing: the numpy oracle's loops run on the calling thread."""


def page_copies() -> HostPages:
    """Host pages read in place (ellpack/pages.py)."""
    return HostPages()


def summarize_dense(block, missing: float, budget):
    """sketch/reference.py's summaries of a dense block, in numpy."""
    return _sketch.summarize_dense(np, block, missing, budget)


def segmented_searchsorted(a, lo, hi, v, max_width: int, right: bool):
    """sketch/reference.py's segmented binary search, in numpy."""
    return _sketch.segmented_searchsorted(np, a, lo, hi, v, max_width, right)


__all__ = offered_names()
