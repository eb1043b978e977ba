"""float32 exp rounded exactly as glibc's expf, on numpy and cupy arrays alike.

XGBoost's logistic gradients call expf; glibc's expf is not correctly rounded,
so even a correctly rounded exp differs from it in about 1 input in 2000. Those
one-ulp differences in gradients compound over rounds (visibly when
reg_lambda = 0). Following glibc's algorithm step for step (a 32-entry table
of 2^(i/32) and a cubic polynomial, evaluated in double) gives its exact bits,
on the GPU too, and with them tree-for-tree parity with XGBoost.
"""

from __future__ import annotations

from decimal import Decimal, localcontext

import numpy as np

from .backend import kernels

_KERNELS = kernels.declare("expf.cu", ("expf_values",))

_N = 32
_C0 = float.fromhex("0x1.c6af84b912394p-5") / _N / _N / _N
_C1 = float.fromhex("0x1.ebfce50fac4f3p-3") / _N / _N
_C2 = float.fromhex("0x1.62e42ff0c52d6p-1") / _N
_SHIFT = float.fromhex("0x1.8p+52")
_INVLN2N = float.fromhex("0x1.71547652b82fep+0") * _N
_OVERFLOW = np.float32(float.fromhex("0x1.62e42ep6"))  # above this expf is +inf
_UNDERFLOW = np.float32(-float.fromhex("0x1.9fe368p6"))  # below this expf is 0


def _table() -> np.ndarray:
    # bits of 2^(i/32), correctly rounded, minus i << 47 (glibc's __exp2f_data.tab)
    with localcontext() as ctx:
        ctx.prec = 60
        vals = [float(Decimal(2) ** (Decimal(i) / Decimal(_N))) for i in range(_N)]
    return np.array([np.float64(v).view(np.uint64) - np.uint64(i << 47) for i, v in enumerate(vals)], dtype=np.uint64)


_TABLE = _table()


def expf(xp, x):
    """exp of a float32 array, bit-identical to glibc's expf (one kernel on CuPy: kernels/expf.cuh)."""
    if xp is not np:
        return _device_expf(xp, x)
    x = x.astype(xp.float32)
    loop = _host_loop() if x.size >= _MIN_LOOP_SIZE else None
    if loop is not None:
        from . import cpu

        out = np.empty(x.shape, dtype=np.float32)
        cpu.run_chunks(loop, x.size, np.ascontiguousarray(x).ravel(), _TABLE, out.reshape(-1),
                       min_chunk=_MIN_VALUES_PER_THREAD)
        return out
    with np.errstate(over="ignore", invalid="ignore"):  # inf and nan inputs are settled below
        z = _INVLN2N * x.astype(xp.float64)
        kd = z + _SHIFT  # rounds z to an integer held in the low mantissa bits
        ki = kd.view(xp.uint64)
        r = z - (kd - _SHIFT)
        table = xp.asarray(_TABLE)
        t = table[(ki % xp.uint64(_N)).astype(xp.int64)] + (ki << xp.uint64(52 - 5))
        s = t.view(xp.float64)
        y = (_C0 * r + _C1) * (r * r) + (_C2 * r + 1.0)
        y = (y * s).astype(xp.float32)
    y = xp.where(x > _OVERFLOW, xp.float32(np.inf), y)
    y = xp.where(x < _UNDERFLOW, xp.float32(0.0), y)
    return xp.where(xp.isnan(x), x, y)


# Below this many values the array steps cost less than a call of the compiled loop.
_MIN_LOOP_SIZE = 1024
# Below this many values a thread's share of the compiled loop costs less than handing it over.
_MIN_VALUES_PER_THREAD = 1 << 15
_loops: dict = {}


def _host_loop():
    """expf's steps as one compiled loop (cpu/), where the compiled CPU backend is loaded (a CPU
    fit's: numba is then imported already; a GPU fit never loads it); None elsewhere."""
    from . import cpu

    if not cpu.compiled_loaded():
        return None
    loop = _loops.get("expf")
    if loop is None:
        loop = _loops["expf"] = cpu.jit(_expf_values)
    return loop


def _expf_values(lo, hi, x, table, out):
    """expf of values lo..hi, the array steps of expf() one value at a time (the same double
    operations in the same order: the same bits). The values counted unsigned (numba checks a
    signed index for wrap-around on every read): 500K values, one thread, 2.04 -> 1.65 ms."""
    bits = np.empty(1, dtype=np.float64)
    as_int = bits.view(np.uint64)
    for i in range(np.uint64(lo), np.uint64(hi)):
        v = x[i]
        if v != v:
            out[i] = v
            continue
        if v > _OVERFLOW:
            out[i] = np.float32(np.inf)
            continue
        if v < _UNDERFLOW:
            out[i] = np.float32(0.0)
            continue
        z = _INVLN2N * np.float64(v)
        kd = z + _SHIFT
        bits[0] = kd
        ki = as_int[0]
        r = z - (kd - _SHIFT)
        as_int[0] = table[np.int64(ki % np.uint64(_N))] + (ki << np.uint64(52 - 5))
        s = bits[0]
        y = (_C0 * r + _C1) * (r * r) + (_C2 * r + 1.0)
        out[i] = np.float32(y * s)


# The same steps on the device: kernels/expf.cuh, each double operation a round-to-nearest
# intrinsic (tests/test_device_kernels.py checks its constants against these).
def _device_expf(cupy, x):
    from .device_arrays import contiguous_float32

    x = contiguous_float32(cupy.asarray(x))
    out = cupy.empty(x.shape, dtype=cupy.float32)
    kernels.launch_1d(kernels.function("expf.cu", _KERNELS, "expf_values"), out.size,
                      (x, np.int64(out.size), device_table(cupy), out))
    return out


_tables: dict = {}


def device_table(xp):
    """The 2^(i/32) table on the current CUDA device."""
    dev = xp.cuda.runtime.getDevice()
    t = _tables.get(dev)
    if t is None:
        t = _tables[dev] = xp.asarray(_TABLE)
    return t
