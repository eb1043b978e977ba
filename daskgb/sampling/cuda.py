"""Gradient-based sampling on a GPU: kernels/sampling.cu computes each row's regularised gradient as it reads the pairs.

The threshold's counts and sums and the sample itself, with no per-row array and no sort:
the same exact integers and the same bits as sampling's reference (_SortedRows, mvs_weights).
"""

from __future__ import annotations

import cupy
import numpy as np

from ..arrays import to_host
from ..backend import kernels
from .reference import row_runs

_KERNELS = kernels.declare("sampling.cu", ("mvs_extremes", "mvs_candidate_stats", "mvs_sample"))

def contiguous_pairs(gpair):
    """(n, 2) gradient pairs as the sampling kernels read them: contiguous float32."""
    return cupy.ascontiguousarray(gpair, dtype=cupy.float32)

def mvs_extremes(gpair, mvs_lambda: float) -> tuple[int, float, float]:
    """(rows with r > 0, smallest positive r, largest r) of the rows' regularised gradients
    r = sqrt(g^2 + lambda h^2) (kernels/sampling.cu; one launch, one copy back)."""
    g = contiguous_pairs(gpair)
    out = cupy.asarray(np.array([0, np.float64(np.inf).view(np.uint64), 0], dtype=np.uint64))
    fn = kernels.function("sampling.cu", _KERNELS, "mvs_extremes")
    kernels.launch_1d(fn, g.shape[0], (g, np.int64(g.shape[0]), np.float64(mvs_lambda), out))
    count, lo, hi = to_host(out)
    return int(count), float(np.uint64(lo).view(np.float64)), float(np.uint64(hi).view(np.float64))

def mvs_candidate_stats(gpair, mvs_lambda: float, cands: np.ndarray, scale: float) -> np.ndarray:
    """(4, m) int64 for ascending candidates c_j: #{r < c_j}, #{r <= c_j} and the sums of
    trunc(r / scale) over those rows, over the rows with r > 0 (sampling.mvs_threshold's
    evaluate; kernels/sampling.cu, one launch, no sort)."""
    g = contiguous_pairs(gpair)
    m = int(cands.size)
    stats = cupy.zeros(4 * (m + 1), dtype=cupy.uint64)
    fn = kernels.function("sampling.cu", _KERNELS, "mvs_candidate_stats")
    n = g.shape[0]
    blocks = max(1, min(-(-n // kernels.THREADS), 4 * kernels.sm_count()))
    fn((blocks,), (kernels.THREADS,), (g, np.int64(n), np.float64(mvs_lambda), cupy.asarray(cands, dtype=cupy.float64),
                                np.int32(m), np.float64(scale), stats))
    per_k = to_host(stats).astype(np.int64).reshape(4, m + 1)
    return np.cumsum(per_k, axis=1)[:, :m]

def mvs_sample(gpair, mvs_lambda: float, mu: float, key: int, first_row, inplace: bool = False):
    """The sampled gradient pairs: each row's pair times 1 / p if kept, else 0 (sampling.mvs_sample);
    inplace: into gpair itself where it is a contiguous float32 array (a row is read, then written).
    first_row: the global index of the first row, or the rows' runs (reference.row_runs): a
    launch a run, each keyed from its run's first global row."""
    g = contiguous_pairs(gpair)
    out = g if inplace else cupy.empty_like(g)
    fn = kernels.function("sampling.cu", _KERNELS, "mvs_sample")
    start = 0
    for first, count in row_runs(g.shape[0], first_row):
        if count:
            kernels.launch_1d(fn, count, (g[start : start + count], np.int64(count), np.float64(mvs_lambda),
                                          np.float64(mu), np.uint64(key), np.uint64(first),
                                          out[start : start + count]))
        start += count
    return out


class KernelRows:
    """The CUDA backend's view of a worker's rows for the threshold search: r_i computed from
    the gradient pairs inside each kernel, with no per-row array and no sort."""

    def __init__(self, gpair, mvs_lambda: float):
        # Contiguous once (a multiclass column is a strided view), not at every bracket step.
        self.gpair, self._lambda = contiguous_pairs(gpair), mvs_lambda

    def extremes(self) -> tuple[int, float, float]:
        return mvs_extremes(self.gpair, self._lambda)

    def stats(self, cands: np.ndarray, scale: float) -> np.ndarray:
        return mvs_candidate_stats(self.gpair, self._lambda, np.asarray(cands, dtype=np.float64), scale)


def mvs_rows(gpair, mvs_lambda: float) -> KernelRows:
    """The backend's view of a worker's rows (cupy_backend.mvs_rows)."""
    return KernelRows(gpair, mvs_lambda)


def mvs_apply(rows: KernelRows, mvs_lambda: float, mu: float, key: int, first_row, inplace: bool = False):
    """The sampled pairs (cupy_backend.mvs_apply): mvs_sample over the rows' pairs."""
    return mvs_sample(rows.gpair, mvs_lambda, mu, key, first_row, inplace=inplace)
