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
    """exp of a float32 array, bit-identical to glibc's expf (one fused kernel on CuPy)."""
    if xp is not np:
        return _cuda_expf(xp)(xp.asarray(x, dtype=xp.float32), device_table(xp))
    x = x.astype(xp.float32)
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


# The same steps as a CUDA device function, for kernels that need expf (objective.py too).
# Each double operation is a round-to-nearest intrinsic, so no multiply-add is contracted
# and every rounding is the one numpy makes above -- except that CuPy compiles kernels
# with -ftz=true, so results below float32's smallest normal (x < -87.3) come out 0, as
# they did from CuPy's own array operations.
CUDA_EXPF = f"""
__device__ __forceinline__ float daskgb_expf(float x, const unsigned long long* table) {{
  const double z = __dmul_rn({_INVLN2N.hex()}, (double)x);
  const double kd = __dadd_rn(z, {_SHIFT.hex()});
  const unsigned long long ki = (unsigned long long)__double_as_longlong(kd);
  const double r = __dsub_rn(z, __dsub_rn(kd, {_SHIFT.hex()}));
  const double s = __longlong_as_double((long long)(table[ki % {_N}ull] + (ki << {52 - 5})));
  const double y = __dadd_rn(__dmul_rn(__dadd_rn(__dmul_rn({_C0.hex()}, r), {_C1.hex()}), __dmul_rn(r, r)),
                             __dadd_rn(__dmul_rn({_C2.hex()}, r), 1.0));
  float out = (float)__dmul_rn(y, s);
  if (x > {float(_OVERFLOW).hex()}f) out = __int_as_float(0x7f800000);
  if (x < {float(_UNDERFLOW).hex()}f) out = 0.0f;
  return isnan(x) ? x : out;
}}
"""

_tables: dict = {}
_kernels: dict = {}


def device_table(xp):
    """The 2^(i/32) table on the current CUDA device."""
    dev = xp.cuda.runtime.getDevice()
    t = _tables.get(dev)
    if t is None:
        t = _tables[dev] = xp.asarray(_TABLE)
    return t


def _cuda_expf(xp):
    k = _kernels.get("expf")
    if k is None:
        k = _kernels["expf"] = xp.ElementwiseKernel(
            "float32 x, raw uint64 table", "float32 y", "y = daskgb_expf(x, &table[0])", "daskgb_expf_kernel",
            preamble=CUDA_EXPF, options=("--fmad=false",))
    return k
