// glibc's expf to the bit, on the device: daskgb/fmath.py's algorithm (its numpy version is
// the oracle, and tests/test_objective_metric.py checks these constants against its own).
//
// XGBoost's logistic and softmax gradients call expf, and glibc's expf is not correctly
// rounded: a correctly rounded exp differs from it in about 1 input in 2000, and those ulps
// compound over rounds. glibc's steps are a 32-entry table of 2^(i/32) (less i << 47) and a
// cubic in double; each double operation here is a round-to-nearest intrinsic, so none is
// contracted into a multiply-add whatever the compile flags, and every rounding is numpy's.
// `table` is fmath.device_table's copy of fmath._TABLE.
#pragma once

__device__ __forceinline__ float daskgb_expf(float x, const unsigned long long* __restrict__ table) {
  const double z = __dmul_rn(0x1.71547652b82fep+5, (double)x);
  const double kd = __dadd_rn(z, 0x1.8000000000000p+52);  // rounds z to an integer in the low bits
  const unsigned long long ki = (unsigned long long)__double_as_longlong(kd);
  const double r = __dsub_rn(z, __dsub_rn(kd, 0x1.8000000000000p+52));
  const double s = __longlong_as_double((long long)(table[ki % 32ull] + (ki << 47)));
  const double y = __dadd_rn(__dmul_rn(__dadd_rn(__dmul_rn(0x1.c6af84b912394p-20, r), 0x1.ebfce50fac4f3p-13),
                                       __dmul_rn(r, r)),
                             __dadd_rn(__dmul_rn(0x1.62e42ff0c52d6p-6, r), 1.0));
  float out = (float)__dmul_rn(y, s);
  if (x > 0x1.62e42e0000000p+6f) out = __int_as_float(0x7f800000);  // above: +inf
  if (x < -0x1.9fe3680000000p+6f) out = 0.0f;                         // below: 0
  return isnan(x) ? x : out;
}
