"""The compiled CPU backend: numpy_backend, with the hot loops that bound a CPU fit compiled (cpu/).

What CPU workers run when numba is installed (backend.get_backend). Every stage not named
below is numpy_backend's own; each compiled loop gives the numpy oracle's results (the same
bits where the arithmetic is the same, as tests/stages check on random input), so the
backend's facts are the oracle's.
"""

from __future__ import annotations

from .numpy_backend import *  # noqa: F401,F403 (the oracle's facts and stages, overridden below)
from .contract import offered_names
from ..cpu import set_threads  # noqa: F401
from ..histogram.compiled import build_histograms, children_histograms, sum_gradients  # noqa: F401
from ..partition.compiled import apply_splits  # noqa: F401
from ..predict.compiled import add_leaf_values, leaf_indices, predict_margin  # noqa: F401
from ..split.compiled import evaluate_splits  # noqa: F401
from ..ellpack.compiled import pack_dense, pack_dense_sparse, pack_symbols, unpack_symbols  # noqa: F401
from ..sketch.compiled import summarize_dense  # noqa: F401

__all__ = offered_names()
