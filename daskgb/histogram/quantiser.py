"""The gradient quantiser (XGBoost's GradientQuantiser): a round's gradient pairs as the histograms sum them.

Atomic adds on a GPU land in no fixed order and float sums depend on the order, so GPU
histograms are summed in int64 fixed point, as XGBoost does (XGBOOST_GPU_NOTES §3). The
scale of each column c (gradient, hessian) is sized once per tree:

    S        = sum over rows of |gpair[:, c]|, in float64 -- over every worker's rows,
               so that every worker quantises alike (their sums are then summed)
    R        = 2 ** ceil(log2(S))          (R = 1 when S == 0)
    scale[c] = R / 2**62
    fixed    = trunc(float64(g) / scale[c]) as int64

scale is a power of two, so g / scale is exact and only the truncation loses anything,
less than scale per row. Every row has |fixed| <= 2**62 and all rows together sum to at
most S / scale <= 2**62 in absolute value (up to the rounding of S, far below the 2**63
limit), so any sum of rows -- a bin, a node, parent minus child, the same over all
workers -- fits int64. Integer adds are associative: histograms are exact and identical
whatever order the adds happen in. Multiplying by scale turns an int64 sum back into a
double (split evaluation does). The numpy backend sums float64 in row order instead, and
its scale is one.

The arithmetic is here for the host (fixed_point_scale) and in kernels/reduce.cu's
fixed_point_scales for the device (the device grower sizes the scale without a host wait;
tests/test_device_kernels.py compares the two); the backends' prepare_gradients apply it. Every training path sizes the scale through
quantise(); nothing else does.
"""

from __future__ import annotations

import math

import numpy as np

from ..phases import ALLREDUCE, OTHER, mark

# 2 ** 62: the fixed point's range (see the module docstring).
FIXED_POINT_RANGE = 2.0**62


def pow2_at_least(s: float) -> float:
    """Smallest power of two >= s; 1 for s <= 0."""
    if s <= 0.0:
        return 1.0
    m, e = math.frexp(s)  # s = m * 2**e with 0.5 <= m < 1
    return math.ldexp(1.0, e - 1 if m == 0.5 else e)


def fixed_point_scale(abs_sums) -> np.ndarray:
    """(2,) float64 scales of the gradient and hessian columns, from their |.| sums (host)."""
    total = np.asarray(abs_sums, dtype=np.float64).reshape(2)
    check_finite(total)
    return np.array([pow2_at_least(float(s)) for s in total], dtype=np.float64) / FIXED_POINT_RANGE


def check_finite(total) -> None:
    """The error of gradients that are NaN or infinite, told by the sums a scale is sized by."""
    if not np.all(np.isfinite(total)):
        raise ValueError("gradient pairs contain NaN or infinite values; check the labels and the objective")


def abs_sums(backend, gpair, comm):
    """The (2,) sums of |gradient| and |hessian| over every worker's rows of gpair (on the
    device for the CUDA backend: NCCL sums them there)."""
    local = backend.gradient_abs_sums(gpair)
    if comm.world_size == 1:
        return local
    mark(ALLREDUCE)
    total = comm.allreduce(local)
    mark(OTHER)
    return total


def quantise(backend, gpair, comm, *, wait: bool, abs_sum=None):
    """(the pairs in the histograms' type, the (2,) scale back to double) for gpair, with the
    scale every worker shares: sized by abs_sum where given (e.g. by more rows than gpair's:
    a paged matrix's sampled rows are quantised as all of them), else by abs_sums (by the
    backend itself, from the same rows, on one worker).
    wait=False: the CUDA backend makes the scale on the device without waiting for it (the
    device grower reads it there; FixedGradients.check_finite then checks it later)."""
    # float64 histograms (the CPU backends) take no scale: the sums, and the collective that
    # would agree on them, would go unused.
    if abs_sum is None and comm.world_size > 1 and np.dtype(backend.histogram_dtype).kind == "i":
        abs_sum = abs_sums(backend, gpair, comm)
    return backend.prepare_gradients(gpair, abs_sum=abs_sum, wait=wait)
