"""The sketch's segmented binary search on a GPU: kernels/sketch.cu, a thread a query.

sketch/reference.py is the reference (whole-array steps, one pass per
bit of the widest slice: ~130 small launches for slices of 4M entries on a GPU).
"""

from __future__ import annotations

import cupy
import numpy as np

from ..backend import kernels

_KERNELS = ("segmented_search_right", "segmented_search_left")

def segmented_searchsorted(a, lo, hi, v, right: bool):
    """sketch._segmented_searchsorted in one launch (kernels/sketch.cu): for each query, the
    place of v[q] in the sorted run a[lo[q]:hi[q]] (searchsorted's side "right" or "left"),
    as an index into a. a, v: float64; lo, hi: int64."""
    a = cupy.ascontiguousarray(a, dtype=cupy.float64)
    v = cupy.ascontiguousarray(v, dtype=cupy.float64)
    lo = cupy.ascontiguousarray(lo, dtype=cupy.int64)
    hi = cupy.ascontiguousarray(hi, dtype=cupy.int64)
    out = cupy.empty(v.size, dtype=cupy.int64)
    fn = kernels.function("sketch.cu", _KERNELS, "segmented_search_right" if right else "segmented_search_left")
    kernels.launch_1d(fn, v.size, (a, lo, hi, v, np.int64(v.size), out))
    return out
