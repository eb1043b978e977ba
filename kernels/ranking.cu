// LambdaRank's pairs on the device (daskgb/ranking_cuda.py launches them; the numpy chunk loop of
// daskgb/ranking.py LambdaRank._gradient is the oracle). One thread a pair, the pairs never
// materialised: a topk pair's documents come from its index by a binary search of `ends` (as
// ranking._topk_pairs' searchsorted does), a sampled pair's from the arrays of _sampled_pairs.
// Each pair makes the loop body's float operations in its order (no multiply-add: --fmad=false;
// the sigmoid is objective._sigmoid's, glibc's expf included) and adds its lambda and hessian
// into the rows' double sums with atomics (so only the order of those sums differs from numpy's).
#include "expf.cuh"

#define GRID_STRIDE(i, n) \
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (n); i += (long long)gridDim.x * blockDim.x)

// The objectives of ranking.py (their _delta): rank:pairwise, rank:ndcg, rank:map.
enum RankObjective { kPairwise = 0, kNdcg = 1, kMap = 2 };

// XGBoost's Sigmoid: 1 / (exp(min(-x, 88.7)) + 1), in float (objective._sigmoid; objective.cu's
// sigmoid_of). numpy's minimum propagates NaN, fminf would drop it.
__device__ __forceinline__ float rank_sigmoid(float x, const unsigned long long* __restrict__ table) {
  const float m = isnan(-x) ? -x : fminf(-x, 88.7f);
  const float e = daskgb_expf(m, table);
  return 1.0f / (e + 1.0f);
}

// numpy's x.astype(float32).astype(float64), subnormal results kept: the kernels are built with
// -ftz=true, which would flush a float32 below 2^-126 to zero where numpy keeps it.
__device__ __forceinline__ double through_float32(double x) {
  if (fabs(x) < 0x1p-126) {  // a float32 subnormal (or 0): a multiple of 2^-149, rounded half to even
    return __dmul_rn((double)__double2ll_rn(__dmul_rn(x, 0x1p149)), 0x1p-149);
  }
  return (double)__double2float_rn(x);
}

// numpy's maximum: NaN if either is.
__device__ __forceinline__ double nan_max_d(double a, double b) { return (isnan(a) || a > b) ? a : b; }

// Ranked position of the `pair`-th topk pair's first document: the first i with ends[i] > pair
// (searchsorted side="right"; pair < ends[n - 1]).
__device__ __forceinline__ long long upper_bound(const long long* __restrict__ ends, long long n, long long pair) {
  long long a = 0, b = n;
  while (a < b) {
    const long long mid = (a + b) >> 1;
    if (ends[mid] > pair) {
      b = mid;
    } else {
      a = mid + 1;
    }
  }
  return a;
}

// Every pair of the round, as ranking.LambdaRank._gradient's loop body. Positions are of the
// ranked list (ranking._Ranked): ys / ss are the labels and margins in that order, group and
// rank each position's query and place in it. kTopk: pairs 0..ends[n_rows - 1] - 1 enumerated
// from ends / partners; else the n_pairs pairs (first[i], second[i]). varied: the queries whose
// scores are not all equal (score normalisation applies to them when score_normalization).
// NDCG reads gain / discount (per position) and inv_idcg (per query); MAP reads n_rel / acc
// (per position) and n_total (per query). grad / hess / sum_lambda are zeroed double sums.
template <int kObjective, bool kTopk>
__global__ void lambda_pairs(const long long* __restrict__ ends, const long long* __restrict__ partners,
                             const long long* __restrict__ first, const long long* __restrict__ second,
                             long long n_pairs, long long n_rows, const float* __restrict__ ys,
                             const float* __restrict__ ss, const long long* __restrict__ group,
                             const long long* __restrict__ rank, const bool* __restrict__ varied,
                             int score_normalization, const double* __restrict__ gain,
                             const double* __restrict__ discount, const double* __restrict__ inv_idcg,
                             const double* __restrict__ n_rel, const double* __restrict__ acc,
                             const double* __restrict__ n_total, const unsigned long long* __restrict__ table,
                             double* __restrict__ grad, double* __restrict__ hess, double* __restrict__ sum_lambda) {
  const long long total = kTopk ? (n_rows > 0 ? ends[n_rows - 1] : 0) : n_pairs;
  GRID_STRIDE(p, total) {
    long long a, b;
    if constexpr (kTopk) {
      a = upper_bound(ends, n_rows, p);
      b = a + 1 + (p - (ends[a] - partners[a]));
    } else {
      a = first[p];
      b = second[p];
    }
    const float ya = ys[a], yb = ys[b];
    if (!(ya != yb)) continue;
    const long long hi = ya > yb ? a : b;
    const long long lo = ya > yb ? b : a;
    const long long g = group[hi];
    const float diff = ss[hi] - ss[lo];
    const double sigmoid = (double)rank_sigmoid(diff, table);
    double delta = 1.0;
    if constexpr (kObjective == kNdcg) {
      const double gain_hi = gain[hi], gain_lo = gain[lo];
      const double disc_hi = discount[hi], disc_lo = discount[lo];
      const double original = __dadd_rn(__dmul_rn(gain_hi, disc_hi), __dmul_rn(gain_lo, disc_lo));
      const double changed = __dadd_rn(__dmul_rn(gain_lo, disc_hi), __dmul_rn(gain_hi, disc_lo));
      delta = __dmul_rn(__dsub_rn(original, changed), inv_idcg[g]);
    } else if constexpr (kObjective == kMap) {
      const long long top = hi < lo ? hi : lo, bottom = hi < lo ? lo : hi;  // top is ranked above bottom
      const double r_a = (double)(rank[top] + 1), r_b = (double)(rank[bottom] + 1);
      const double m = n_rel[bottom], nn = n_rel[top];
      const double between = __dsub_rn(acc[bottom - 1], acc[top]);
      if (ys[top] < ys[bottom]) {  // up
        delta = __ddiv_rn(__dsub_rn(__dsub_rn(__ddiv_rn(m, r_b), __ddiv_rn(__dadd_rn(nn, 1.0), r_a)), between),
                          n_total[g]);
      } else {  // down
        delta = __ddiv_rn(__dadd_rn(__dsub_rn(__ddiv_rn(nn, r_a), __ddiv_rn(m, r_b)), between), n_total[g]);
      }
    }
    delta = fabs(delta);
    if (score_normalization && varied[g]) {
      delta = __ddiv_rn(delta, __dadd_rn((double)fabsf(diff), 0.01));
    }
    const double lam = through_float32(__dmul_rn(__dsub_rn(sigmoid, 1.0), delta));
    const double h = through_float32(
        __dmul_rn(__dmul_rn(nan_max_d(__dmul_rn(sigmoid, __dsub_rn(1.0, sigmoid)), 1e-16), delta), 2.0));
    atomicAdd(grad + hi, lam);
    atomicAdd(grad + lo, -lam);
    atomicAdd(hess + hi, h);
    atomicAdd(hess + lo, h);
    atomicAdd(sum_lambda + g, __dmul_rn(-2.0, lam));
  }
}
