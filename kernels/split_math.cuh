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

// A candidate of split.cu or categorical.cu (layouts.py CANDIDATE: its loss change, where it
// lies in its feature's visiting order, and its children's sums) beats another: the larger loss
// change, ties to the lower feature, then to the earlier in the visiting order.
__device__ __forceinline__ bool beats(const Candidate& c, const Candidate& o) {
  if (c.loss != o.loss) return c.loss > o.loss;
  return c.feature != o.feature ? c.feature < o.feature : c.order < o.order;
}

// Loss change of a split into (left, right), or -inf where split/reference.py's evaluate_splits
// rejects it (a child below min_child_weight, or a non-finite loss change).
__device__ __forceinline__ float loss_change(long long lg, long long lh, long long rg, long long rh, double scale_g,
                                             double scale_h, float root_gain, const SplitParams& p) {
  const double dlg = (double)lg * scale_g, dlh = (double)lh * scale_h;
  const double drg = (double)rg * scale_g, drh = (double)rh * scale_h;
  const float gain = child_gain(dlg, dlh, p) + child_gain(drg, drh, p);
  const float loss = gain - root_gain;
  const bool ok = dlh >= p.min_child_weight && drh >= p.min_child_weight && isfinite(loss);
  return ok ? loss : neg_inf();
}

__device__ __forceinline__ Candidate shfl_down(const Candidate& c, int delta) {
  Candidate o;
  o.loss = __shfl_down_sync(0xffffffffu, c.loss, delta);
  o.feature = __shfl_down_sync(0xffffffffu, c.feature, delta);
  o.order = __shfl_down_sync(0xffffffffu, c.order, delta);
  o.left_g = __shfl_down_sync(0xffffffffu, c.left_g, delta);
  o.left_h = __shfl_down_sync(0xffffffffu, c.left_h, delta);
  o.right_g = __shfl_down_sync(0xffffffffu, c.right_g, delta);
  o.right_h = __shfl_down_sync(0xffffffffu, c.right_h, delta);
  return o;
}
