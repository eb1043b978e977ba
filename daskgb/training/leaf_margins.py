"""The training margins moved by a new tree: each row's margin plus its final leaf's value.

The rows' leaves come from the partition the tree grew on (no re-prediction). numpy/CuPy do it
as a gather and an add; a CPU fit with the compiled backend loaded (cpu.compiled_loaded) does
it in one compiled pass, the same float32 adds: for 7-class Covertype-shaped 523K rows the
numpy steps (a gather, a strided add and an integer divide per class) took ~25 ms a round.
"""

from __future__ import annotations

import numpy as np

from .. import cpu
from .evaluation import column

_compiled: dict = {}
# Below this many rows a thread's share costs less than handing it over.
_MIN_ROWS_PER_THREAD = 1 << 15


def _add_leaves(lo, hi, margin, group, values, positions, first, n_groups):
    """margin[r, group] += values[positions[first + r] // n_groups] for rows lo..hi."""
    g = np.uint64(group)
    divisor = np.uint64(n_groups)
    start = np.uint64(first)
    for r in range(lo, hi):
        ur = np.uint64(r)
        leaf = np.uint64(positions[start + ur]) // divisor
        margin[ur, g] = margin[ur, g] + values[leaf]


def add_leaf_values(backend, xp, margin, group: int, values, positions, n_rows: int, n_groups: int) -> None:
    """Move output group `group`'s margins by its tree's leaf values (values, a host array) at
    the rows' nodes: positions of the forest's partition (a forest's tree g: virtual rows
    g * n_rows + r, node ids interleaved by group)."""
    if xp is np and cpu.compiled_loaded() and values.dtype == margin.dtype == np.float32:
        if not _compiled:
            _compiled["add"] = cpu.jit(_add_leaves)
        m = margin if margin.ndim == 2 else margin[:, None]
        cpu.run_chunks(_compiled["add"], m.shape[0], m, group, values, positions, group * n_rows, n_groups,
                       min_chunk=_MIN_ROWS_PER_THREAD)
        return
    leaves = positions if n_groups == 1 else positions[group * n_rows : (group + 1) * n_rows] // n_groups
    column(margin, group)[...] += backend.to_device(values)[leaves]
