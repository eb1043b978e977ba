"""The objectives on a GPU as daskgb's own kernels (kernels/objective.cu): gradients, transforms, label checks, sums.

objective.py calls these for CuPy arrays; its numpy steps are the oracle, and each kernel
makes the same float32 operations in the same order (glibc's expf included: kernels/expf.cuh),
so the results are the same bits. The base-score sums are exact (kernels/exact_sum.cuh).
Arrays are taken as objective.py has them: float32 margins, labels and weights, C-contiguous
(device_arrays.contiguous_float32 makes them so where they are not).
"""

from __future__ import annotations

import cupy
import numpy as np

from . import device_arrays as da
from .backend import kernels
from .fmath import device_table

# The label rules of count_refused_labels (kernels/objective.cu's LabelRule).
LABEL_RULES = {"binary": 0, "unit_interval": 1, "negative": 2, "not_positive": 3, "class": 4}

_KERNELS = kernels.declare("objective.cu", (
    "logistic_gradient", "squared_error_gradient", "pack_gradients", "sigmoid", "softmax_gradient",
    "softmax", "argmax_rows", "count_refused_labels<0>", "count_refused_labels<1>", "count_refused_labels<2>",
    "count_refused_labels<3>", "count_refused_labels<4>", "label_sums", "class_weight_sums<true>",
    "class_weight_sums<false>"))

# Dynamic shared memory a block of class_weight_sums may hold its sums in: the 48 KiB a block
# may take without opting in for more, less the kernel's static shared memory (its scratch).
_SHARED_BYTES = 47 * 1024


def _fn(name: str):
    return kernels.function("objective.cu", _KERNELS, name)


def _vector(a):
    return None if a is None else da.contiguous_float32(a)


def _pairs_out(out, n: int):
    """out, checked as an (n, 2) float32 C-contiguous device array, or a new one where None."""
    if out is None:
        return cupy.empty((n, 2), dtype=cupy.float32)
    if out.shape != (n, 2) or out.dtype != cupy.float32 or not out.flags.c_contiguous:
        raise ValueError(f"gradient pairs go into an ({n}, 2) float32 C-contiguous array, got {out.shape} {out.dtype}")
    return out


def logistic_gradient(margin, y, weight, out=None):
    """(n, 2) float32 gradient pairs of binary:logistic / reg:logistic at the (n,) margins
    (written into out where given)."""
    margin, y, weight = _vector(margin), _vector(y), _vector(weight)
    n = int(margin.size)
    out = _pairs_out(out, n)
    kernels.launch_1d(_fn("logistic_gradient"), n, (margin, y, da.optional(weight), np.int64(n), device_table(cupy),
                                                    out))
    return out


def squared_error_gradient(margin, y, weight, out=None):
    """(n, 2) float32 gradient pairs of reg:squarederror at the (n,) margins (written into out
    where given)."""
    margin, y, weight = _vector(margin), _vector(y), _vector(weight)
    n = int(margin.size)
    out = _pairs_out(out, n)
    kernels.launch_1d(_fn("squared_error_gradient"), n, (margin, y, da.optional(weight), np.int64(n), out))
    return out


def pack_gradients(grad, hess, weight):
    """objective._pack: (n, 2) float32 pairs (grad * w, hess * w) of the (n,) gradients and the
    hessians: an (n,) device array, or one host number for every row."""
    grad, weight = _vector(grad), _vector(weight)
    n = int(grad.size)
    rows = isinstance(hess, cupy.ndarray)
    out = cupy.empty((n, 2), dtype=cupy.float32)
    kernels.launch_1d(_fn("pack_gradients"), n, (grad, _vector(hess) if rows else da.NULL,
                                                 np.float32(0.0 if rows else hess), da.optional(weight), np.int64(n),
                                                 out))
    return out


def sigmoid(margin):
    """XGBoost's sigmoid of the margins, in float32 (objective._sigmoid)."""
    margin = da.contiguous_float32(margin)
    out = cupy.empty(margin.shape, dtype=cupy.float32)
    kernels.launch_1d(_fn("sigmoid"), out.size, (margin, np.int64(out.size), device_table(cupy), out))
    return out


def _rows(margin):
    margin = da.contiguous_float32(margin)
    n, k = margin.shape
    return margin, int(n), int(k)


def softmax_gradient(margin, y, weight):
    """(n, K, 2) float32 gradient pairs of multi:softprob at the (n, K) margins."""
    margin, n, k = _rows(margin)
    y, weight = _vector(y), _vector(weight)
    out = cupy.empty((n, k, 2), dtype=cupy.float32)
    kernels.launch_1d(_fn("softmax_gradient"), n, (margin, y, da.optional(weight), np.int64(n), np.int32(k),
                                                   device_table(cupy), out))
    return out


def softmax(margin):
    """(n, K) float32 class probabilities of the (n, K) margins (objective._softmax, shifted by
    each row's max)."""
    margin, n, k = _rows(margin)
    out = cupy.empty((n, k), dtype=cupy.float32)
    kernels.launch_1d(_fn("softmax"), n, (margin, np.int64(n), np.int32(k), device_table(cupy), out))
    return out


def argmax_rows(margin):
    """(n,) float32: each row's first largest margin's class (numpy's argmax, as float32)."""
    margin, n, k = _rows(margin)
    out = cupy.empty(n, dtype=cupy.float32)
    kernels.launch_1d(_fn("argmax_rows"), n, (margin, np.int64(n), np.int32(k), out))
    return out


def count_refused_labels(y, rule: str, n_classes: int = 0) -> int:
    """The labels that LABEL_RULES[rule] refuses (one host wait)."""
    y = _vector(y)
    count = cupy.zeros(1, dtype=cupy.uint64)
    n = int(y.size)
    if n:
        da.launch_reduction(_fn(f"count_refused_labels<{LABEL_RULES[rule]}>"), n,
                            (y, np.int64(n), np.float32(n_classes), count))
    return int(count.get()[0])


def label_sums(y, weight) -> tuple[float, float]:
    """(sum w y, sum w), or (sum y, n) without weights: each the double nearest the exact sum."""
    y, weight = _vector(y), _vector(weight)
    n = int(y.size)
    if n == 0:
        return 0.0, 0.0
    out = cupy.empty(2, dtype=cupy.float64)
    da.launch_reduction(_fn("label_sums"), n, (y, da.optional(weight), np.int64(n), da.exact_accumulator(2), out))
    total, weights = (float(v) for v in out.get())
    return total, weights


def class_weight_sums(y, weight, n_classes: int) -> list[float]:
    """Each class's weight (its row count without weights), then all rows' weight: exact sums."""
    y, weight = _vector(y), _vector(weight)
    n, k = int(y.size), int(n_classes)
    if n == 0:
        return [0.0] * (k + 1)
    out = cupy.empty(k + 1, dtype=cupy.float64)
    smem = (k + 1) * da.EXACT_SLOTS * 8
    shared = smem <= _SHARED_BYTES
    fn = _fn(f"class_weight_sums<{kernels.template_flag(shared)}>")
    fn((da.reduction_grid(n),), (kernels.THREADS,),
       (y, da.optional(weight), np.int64(n), np.int32(k), da.exact_accumulator(k + 1), out),
       shared_mem=smem if shared else 0)
    return [float(v) for v in out.get()]
