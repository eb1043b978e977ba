// Gradient-based sampling (MVS) over gradient pairs, without the sorted copy of every
// row's regularised gradient that sampling/reference.py builds
// (sampling/cuda.py; sampling/reference.py is the reference). Every figure here
// equals the reference's bit for bit: r_i is computed with the same double operations
// (no fused multiply-add), counts and fixed-point sums are exact integers, and the
// row's uniform is the same splitmix64 hash.
#include "common.cuh"


// sqrt(g^2 + lambda * h^2) in double, each operation rounded as numpy rounds it.
__device__ __forceinline__ double mvs_r(float g, float h, double lambda) {
  const double gd = (double)g, hd = (double)h;
  return sqrt(__dadd_rn(__dmul_rn(gd, gd), __dmul_rn(lambda, __dmul_rn(hd, hd))));
}

// out[0] += rows with r > 0; out[1] = min positive r, out[2] = max r (as the bits of
// non-negative doubles, whose order is the unsigned order of their bits). out: zeroed,
// out[1] = the bits of +inf. Launch: 1-D, any shape.
__global__ void mvs_extremes(const float2* __restrict__ gpair, long long n, double lambda,
                             unsigned long long* __restrict__ out) {
  unsigned long long count = 0, lo = 0x7FF0000000000000ull, hi = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const float2 p = gpair[i];
    const double r = mvs_r(p.x, p.y, lambda);
    if (r > 0.0) {
      const unsigned long long bits = (unsigned long long)__double_as_longlong(r);
      ++count;
      lo = min(lo, bits);
      hi = max(hi, bits);
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    count += __shfl_down_sync(0xffffffffu, count, o);
    lo = min(lo, __shfl_down_sync(0xffffffffu, lo, o));
    hi = max(hi, __shfl_down_sync(0xffffffffu, hi, o));
  }
  if ((threadIdx.x & 31) == 0 && count) {
    atomicAdd(&out[0], count);
    atomicMin(&out[1], lo);
    atomicMax(&out[2], hi);
  }
}

// For the rows with r > 0: at[k] counts the rows with k candidates <= r, below[k] the rows
// with k candidates < r, and at_sum / below_sum add their trunc(r / scale); inclusive
// prefix sums over k then give, for candidate j, #{r < c_j}, #{r <= c_j} and the fixed-point
// sums of those r. cands: m <= kMaxCandidates ascending values. stats: 4 * (m + 1) zeroed
// counters (at, below, at_sum, below_sum). Launch: 1-D, any number of blocks.
__global__ void mvs_candidate_stats(const float2* __restrict__ gpair, long long n, double lambda,
                                    const double* __restrict__ cands, int m, double scale,
                                    unsigned long long* __restrict__ stats) {
  __shared__ double c[kMaxCandidates];
  __shared__ unsigned long long acc[4 * (kMaxCandidates + 1)];
  for (int k = threadIdx.x; k < m; k += blockDim.x) c[k] = cands[k];
  for (int k = threadIdx.x; k < 4 * (m + 1); k += blockDim.x) acc[k] = 0ull;
  __syncthreads();
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const float2 p = gpair[i];
    const double r = mvs_r(p.x, p.y, lambda);
    if (!(r > 0.0)) continue;
    int a = 0, b = m;  // a = #{c <= r}
    while (a < b) {
      const int mid = (a + b) >> 1;
      if (c[mid] <= r) a = mid + 1; else b = mid;
    }
    int lo = 0, hi = a;  // #{c < r}: among the first a
    while (lo < hi) {
      const int mid = (lo + hi) >> 1;
      if (c[mid] < r) lo = mid + 1; else hi = mid;
    }
    const unsigned long long t = (unsigned long long)(long long)trunc(r / scale);
    atomicAdd(&acc[a], 1ull);
    atomicAdd(&acc[(m + 1) + lo], 1ull);
    atomicAdd(&acc[2 * (m + 1) + a], t);
    atomicAdd(&acc[3 * (m + 1) + lo], t);
  }
  __syncthreads();
  for (int k = threadIdx.x; k < 4 * (m + 1); k += blockDim.x) {
    if (acc[k]) atomicAdd(&stats[k], acc[k]);
  }
}

// The row's uniform in [0, 1): sampling.row_uniforms.
__device__ __forceinline__ double row_uniform(unsigned long long key, unsigned long long row) {
  unsigned long long z = row + key;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  z = z ^ (z >> 31);
  return (double)(z >> 11) * (1.0 / 9007199254740992.0);
}

// out = gpair * w with w = 1 / p for a kept row and 0 for a dropped one, p = min(1, r / mu)
// (p = 1 for r > 0 when mu == 0), kept when its uniform is below p: sampling.mvs_weights.
// Launch: 1-D, any shape.
__global__ void mvs_sample(const float2* __restrict__ gpair, long long n, double lambda, double mu,
                           unsigned long long key, unsigned long long first_row, float2* __restrict__ out) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const float2 g = gpair[i];
    const double r = mvs_r(g.x, g.y, lambda);
    const double p = mu == 0.0 ? (r > 0.0 ? 1.0 : 0.0) : fmin(1.0, r / mu);
    const bool keep = row_uniform(key, first_row + (unsigned long long)i) < p;
    const float w = keep ? (float)(1.0 / p) : 0.0f;
    out[i] = make_float2(g.x * w, g.y * w);
  }
}
