"""The objectives' hot loops compiled for CPUs (cpu/): objective.py's numpy steps, value by value.

objective.py calls these for numpy arrays once the compiled CPU backend is loaded (a CPU fit's;
cpu.compiled_loaded). Each loop makes the numpy steps' float32 and float64 operations in the
same order, so the results are the same bits (tests/stages/test_compiled.py compares them).
The rows are counted unsigned: numba checks a signed index for wrap-around on every read, and
the checks kept the simple loops from vectorising (500K rows, one thread: the logistic pairs
1.01 -> 0.68 ms, the clipped negation 0.35 -> 0.18, 7-class softmax pairs 11.6 -> 10.7, its
row shift 5.1 -> 4.3).
"""

from __future__ import annotations

import numpy as np

from . import cpu
from .fmath import expf

_compiled: dict = {}
# Below this many rows a thread's share costs less than handing it over.
_MIN_ROWS_PER_THREAD = 1 << 15


def _softmax_pairs(lo, hi, e, y, weight, has_weight, out):
    """Gradient pairs of multi:softprob for rows lo..hi from each row's expf of its shifted
    margins (objective.Softmax.gradient: the sum in double class by class, one float divide),
    written class by class: out[k, i] is row i's pair of class k."""
    n_classes = e.shape[1]
    floor = np.float32(1e-16)
    for i in range(np.uint64(lo), np.uint64(hi)):
        wsum = np.float64(0.0)
        for k in range(n_classes):
            wsum += np.float64(e[i, k])
        s = np.float32(wsum)
        label = np.int64(y[i])
        for k in range(n_classes):
            p = e[i, k] / s
            grad = p - np.float32(1.0) if k == label else p
            hess = np.float32(2.0) * p * (np.float32(1.0) - p)
            if has_weight:
                grad = grad * weight[i]
                hess = hess * weight[i]
            out[k, i, 0] = grad
            out[k, i, 1] = hess if (hess > floor or hess != hess) else floor


def _shift_rows(lo, hi, margin, floor, out):
    """out[i, k] = margin[i, k] - max(max_k margin[i, k], floor) in float32 for rows lo..hi
    (objective.Softmax's wmax; NaN where a row holds one, as numpy's max and maximum propagate it)."""
    for i in range(np.uint64(lo), np.uint64(hi)):
        m = margin[i, 0]
        for k in range(1, margin.shape[1]):
            v = margin[i, k]
            if v > m or v != v:
                m = v
            if m != m:
                break
        if not (m != m) and m < floor:
            m = floor
        for k in range(margin.shape[1]):
            out[i, k] = margin[i, k] - m


def softmax_gradient(margin, y, weight, floor):
    """(n, K, 2) float32 gradient pairs of multi:softprob at the (n, K) margins, each row shifted
    by max(its largest margin, floor) (objective.Softmax.gradient's wmax; numpy's row max of a
    (523K, 7) array took ~20 ms, as long as the rest of the gradient). The pairs lie class by
    class (a (K, n, 2) array seen as (n, K, 2)): a class's pairs, what its tree reads, are one
    contiguous (n, 2) array, and the forest's (K n, 2) pairs the whole buffer
    (training/rounds.py), where gathering them from rows of K pairs cost ~15 ms a 523K-row round."""
    if "softmax" not in _compiled:
        _compiled["softmax"] = cpu.jit(_softmax_pairs)
        _compiled["shift"] = cpu.jit(_shift_rows)
    n = margin.shape[0]
    shifted = np.empty(margin.shape, dtype=np.float32)
    cpu.run_chunks(_compiled["shift"], n, np.ascontiguousarray(margin, dtype=np.float32), np.float32(floor), shifted,
                   min_chunk=_MIN_ROWS_PER_THREAD)
    e = expf(np, shifted)
    out = np.empty((margin.shape[1], n, 2), dtype=np.float32)
    has_weight = weight is not None
    w = np.asarray(weight, dtype=np.float32) if has_weight else np.ones(1, dtype=np.float32)
    cpu.run_chunks(_compiled["softmax"], n, np.ascontiguousarray(e), np.asarray(y, dtype=np.float32), w, has_weight,
                   out, min_chunk=_MIN_ROWS_PER_THREAD)
    return out.transpose(1, 0, 2)


def _clipped_negation(lo, hi, margin, out):
    """out = min(-margin, 88.7) in float32 for values lo..hi (objective._sigmoid's expf argument;
    NaN stays NaN, as numpy's minimum keeps it)."""
    cap = np.float32(88.7)
    for i in range(np.uint64(lo), np.uint64(hi)):
        v = -margin[i]
        out[i] = v if (v < cap or v != v) else cap


def _logistic_pairs(lo, hi, e, y, weight, has_weight, out):
    """Gradient pairs of the logistic objectives for rows lo..hi from each row's expf(min(-margin,
    88.7)) (objective._Logistic.gradient: p = 1 / (e + 1), p - y, max(p (1 - p), 1e-16), weighted)."""
    one = np.float32(1.0)
    floor = np.float32(1e-16)
    for i in range(np.uint64(lo), np.uint64(hi)):
        p = one / (e[i] + one)
        grad = p - y[i]
        hess = p * (one - p)
        hess = hess if (hess > floor or hess != hess) else floor
        if has_weight:
            grad = grad * weight[i]
            hess = hess * weight[i]
        out[i, 0] = grad
        out[i, 1] = hess


def logistic_gradient(margin, y, weight):
    """(n, 2) float32 gradient pairs of binary:logistic at float32 margins, labels and weights:
    the array steps' bits in three passes (numpy's steps made ten temporaries: ~3 ms a round on
    500K rows)."""
    if "logistic" not in _compiled:
        _compiled["negate"] = cpu.jit(_clipped_negation)
        _compiled["logistic"] = cpu.jit(_logistic_pairs)
    n = margin.shape[0]
    x = np.empty(margin.shape, dtype=np.float32)
    cpu.run_chunks(_compiled["negate"], n, np.ascontiguousarray(margin), x, min_chunk=_MIN_ROWS_PER_THREAD)
    e = expf(np, x)
    out = np.empty((n, 2), dtype=np.float32)
    has_weight = weight is not None
    w = np.ascontiguousarray(weight) if has_weight else np.ones(1, dtype=np.float32)
    cpu.run_chunks(_compiled["logistic"], n, e, np.ascontiguousarray(y), w, has_weight, out,
                   min_chunk=_MIN_ROWS_PER_THREAD)
    return out
