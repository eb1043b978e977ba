"""Evaluation metrics on a GPU as daskgb's own kernels (kernels/metric.cu): the additive ones' sums, the AUC's parts.

metric.py calls these for CuPy arrays; its array steps are the oracle. Each row's term is
numpy's double arithmetic in numpy's order, and every float sum is exact
(kernels/exact_sum.cuh), so a metric differs from numpy's only by numpy's rounding of its
own sums. The AUC sorts keys that pack the prediction and the row with CuPy's in-place sort (thrust,
shipped compiled with CuPy; its argsort would compile a copy) and takes its running sums by
a scan in a fixed order: the same bits on every run and device.
"""

from __future__ import annotations

import cupy
import numpy as np

from . import device_arrays as da
from .backend import kernels

# Metric name -> kernels/metric.cu's AdditiveMetric.
ADDITIVE = {"rmse": 0, "logloss": 1, "error": 2, "mae": 3}

_KERNELS = kernels.declare("metric.cu", tuple(f"metric_sums<{k}>" for k in range(4)) + (
    "auc_sort_keys", "auc_terms", "auc_area", "scan_chunks<SumOfDoubles>", "scan_chunks<MaxOfIndices>",
    "scan_add<SumOfDoubles>", "scan_add<MaxOfIndices>"))

# auc_parts' sort keys hold a row in 32 bits (kernels/metric.cu's auc_sort_keys).
MAX_AUC_ROWS = 2**32

# kernels/metric.cu's scan: kScanThreads threads, kScanChunk values a block.
_SCAN_THREADS = 256
_SCAN_CHUNK = 2048


def _fn(name: str):
    return kernels.function("metric.cu", _KERNELS, name)


def _vector(a):
    return None if a is None else da.contiguous_float32(a)


def additive_parts(name: str, y, pred, weight):
    """(2,) float64 on the device: (sum of the rows' weighted terms, sum of the weights) of the
    metric `name` (one of ADDITIVE) over (n,) labels and predictions."""
    y, pred, weight = _vector(y), _vector(pred), _vector(weight)
    n = int(y.size)
    if n == 0:
        return cupy.zeros(2, dtype=cupy.float64)
    out = cupy.empty(2, dtype=cupy.float64)
    da.launch_reduction(_fn(f"metric_sums<{ADDITIVE[name]}>"), n,
                        (y, pred, da.optional(weight), np.int64(n), da.exact_accumulator(2), out))
    return out


def inclusive_scan(values, op: str):
    """The inclusive scan of a 1-D device array in metric.cu's fixed order: op "SumOfDoubles"
    (float64 values) or "MaxOfIndices" (int64)."""
    n = int(values.size)
    out = cupy.empty_like(values)
    if n == 0:
        return out
    chunks = -(-n // _SCAN_CHUNK)
    totals = cupy.empty(chunks, dtype=values.dtype)
    _fn(f"scan_chunks<{op}>")((chunks,), (_SCAN_THREADS,), (values, out, np.int64(n), totals))
    if chunks > 1:
        scanned = inclusive_scan(totals, op)
        kernels.launch_1d(_fn(f"scan_add<{op}>"), n - _SCAN_CHUNK, (out, np.int64(n), scanned))
    return out


def auc_parts(y, pred, weight):
    """(2,) float64 on the device: (area under the ROC curve, positive weight x negative weight)
    of (n,) labels and predictions, as metric._auc_parts (ties count half)."""
    y, pred, weight = _vector(y), _vector(pred), _vector(weight)
    n = int(y.size)
    if n == 0:
        return cupy.zeros(2, dtype=cupy.float64)
    if n >= MAX_AUC_ROWS:
        raise ValueError(f"auc_parts sorts at most {MAX_AUC_ROWS - 1} rows, got {n}")
    keys = cupy.empty(n, dtype=cupy.uint64)
    kernels.launch_1d(_fn("auc_sort_keys"), n, (pred, np.int64(n), keys))
    keys.sort()  # in place: thrust, nothing to compile
    tp_terms, fp_terms = cupy.empty(n, dtype=cupy.float64), cupy.empty(n, dtype=cupy.float64)
    ends = cupy.empty(n, dtype=cupy.int64)
    kernels.launch_1d(_fn("auc_terms"), n, (keys, y, pred, da.optional(weight), np.int64(n), tp_terms, fp_terms,
                                            ends))
    tp, fp = inclusive_scan(tp_terms, "SumOfDoubles"), inclusive_scan(fp_terms, "SumOfDoubles")
    last_end = inclusive_scan(ends, "MaxOfIndices")
    out = cupy.empty(2, dtype=cupy.float64)
    da.launch_reduction(_fn("auc_area"), n, (tp, fp, last_end, np.int64(n), da.exact_accumulator(1), out))
    return out
