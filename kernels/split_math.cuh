// Split arithmetic shared by split.cu and growth.cu: split/rules.py's calc_weight and child_gain,
// type for type, on layouts.py's SplitParams (float32 values, promoted to double).
#pragma once
#include "layouts.cuh"

// -inf without <cmath> (NVRTC has no standard headers).
__device__ __forceinline__ float neg_inf() { return __int_as_float(0xff800000); }

__device__ __forceinline__ double threshold_l1(double g, double alpha) {
  return g > alpha ? g - alpha : (g < -alpha ? g + alpha : 0.0);
}

// split/rules.py calc_weight
__device__ __forceinline__ float calc_weight(double G, double H, const SplitParams& p) {
  const bool ok = H >= p.min_child_weight && H > 0.0;
  const double denom = ok ? H + p.reg_lambda : 1.0;
  double w = -threshold_l1(G, p.reg_alpha) / denom;
  if (p.max_delta_step != 0.0 && fabs(w) > p.max_delta_step) w = copysign(p.max_delta_step, w);
  return ok ? (float)w : 0.0f;
}

// split/rules.py child_gain
__device__ __forceinline__ float child_gain(double G, double H, const SplitParams& p) {
  if (!(H > 0.0)) return 0.0f;
  if (p.max_delta_step == 0.0) {
    const double t = threshold_l1(G, p.reg_alpha);
    return (float)(t * t / (H + p.reg_lambda));
  }
  const float w = calc_weight(G, H, p);
  const float g32 = (float)G, h32 = (float)H;
  const float lam = (float)p.reg_lambda;
  // xgboost 3.2's CalcGainGivenWeight: -(2 G w + (H + lambda) * (w * w)), no alpha term. The
  // _rn intrinsics are never fused into multiply-adds, so the float result is split/rules.py child_gain's.
  return -__fadd_rn(__fmul_rn(__fmul_rn(2.0f, g32), w), __fmul_rn(__fadd_rn(h32, lam), __fmul_rn(w, w)));
}
