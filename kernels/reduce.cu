// Device-wide counts and sums over an input or a round's gradient pairs, as daskgb's own
// kernels (daskgb/device_arrays.py launches them): CuPy's reductions would each be compiled
// by NVRTC at first use, its CUB sums for seconds. Counts and fixed-point sums are integers,
// exact in any order; float sums are exact_sum.cuh's, the double nearest the exact sum.
#include "exact_sum.cuh"

constexpr unsigned kFullWarp = 0xffffffffu;

__device__ __forceinline__ unsigned long long warp_sum(unsigned long long v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(kFullWarp, v, o);
  return v;
}

// Lane 0 of each warp adds the warp's total into *out. Every lane of the warp calls it.
__device__ __forceinline__ void warp_add_to(unsigned long long* out, unsigned long long v) {
  v = warp_sum(v);
  if ((threadIdx.x & 31) == 0 && v) atomicAdd(out, v);
}

__device__ __forceinline__ bool float_bits_nan(unsigned b) { return (b & 0x7fffffffu) > 0x7f800000u; }

// dst[i] = float(src[i * stride]) (dst null: nothing written), and in counts (zeroed) the
// non-finite values (counts[0]) and the negative ones (counts[1], -inf included, as numpy's
// `a < 0`), told from the float's bits. inputs.py's checks of labels, weights and margins.
template <class T>
__global__ void checked_float32(const T* __restrict__ src, long long n, long long stride, float* __restrict__ dst,
                                unsigned long long* __restrict__ counts) {
  unsigned long long bad = 0, negative = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const float v = (float)src[i * stride];
    if (dst) dst[i] = v;
    const unsigned b = __float_as_uint(v);
    bad += ((b >> 23) & 0xffu) == 0xffu;
    negative += (b >> 31) && (b & 0x7fffffffu) && !float_bits_nan(b);
  }
  warp_add_to(&counts[0], bad);
  warp_add_to(&counts[1], negative);
}

// *count (zeroed) += the entries of X[0..n) that are NaN or equal to `missing`.
__global__ void count_missing(const float* __restrict__ X, long long n, float missing,
                              unsigned long long* __restrict__ count) {
  unsigned long long c = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const float x = X[i];
    c += float_bits_nan(__float_as_uint(x)) || x == missing;
  }
  warp_add_to(count, c);
}

// The entries of a row of n_features that are neither NaN nor `missing`, counted by a warp (its
// lanes reading consecutive entries); every lane gets the count.
__device__ __forceinline__ unsigned long long row_present_count(const float* __restrict__ row, int n_features,
                                                                float missing, int lane) {
  unsigned long long c = 0;
  for (int f = lane; f < n_features; f += 32) {
    const float x = row[f];
    c += !(float_bits_nan(__float_as_uint(x)) || x == missing);
  }
  return warp_sum(c);
}

// out[r] = the entries of row r of the (n_rows, n_features) array X that are neither NaN nor
// `missing`: a warp a row.
__global__ void present_counts(const float* __restrict__ X, long long n_rows, int n_features, float missing,
                               long long* __restrict__ out) {
  const long long n_warps = ((long long)gridDim.x * blockDim.x) >> 5;
  const int lane = threadIdx.x & 31;
  for (long long r = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5; r < n_rows; r += n_warps) {
    const unsigned long long c = row_present_count(X + r * n_features, n_features, missing, lane);
    if (lane == 0) out[r] = (long long)c;
  }
}

// *longest (zeroed) = the most entries of a row of X that are neither NaN nor `missing`
// (present_counts' max, without the per-row array): a warp a row.
__global__ void longest_present_row(const float* __restrict__ X, long long n_rows, int n_features, float missing,
                                    unsigned long long* __restrict__ longest) {
  const long long n_warps = ((long long)gridDim.x * blockDim.x) >> 5;
  const int lane = threadIdx.x & 31;
  unsigned long long most = 0;
  for (long long r = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5; r < n_rows; r += n_warps) {
    const unsigned long long c = row_present_count(X + r * n_features, n_features, missing, lane);
    most = c > most ? c : most;
  }
  if (lane == 0 && most) atomicMax(longest, most);
}

// out[0], out[1] = the sums of |gradient| and |hessian| over the n pairs, exact then rounded
// once (histogram/quantiser.py sizes the fixed-point scale by them). acc: 2 * kExactSlots + 1
// zeroed int64.
__global__ void gradient_abs_sums(const float2* __restrict__ gpair, long long n, long long* __restrict__ acc,
                                  double* __restrict__ out) {
  __shared__ long long slots[2 * kExactSlots];
  exact_block_start(slots, 2 * kExactSlots);
  ExactSums<2> sums(slots);
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const float2 p = gpair[i];
    sums.add_magnitude<0>(p.x);
    sums.add_magnitude<1>(p.y);
  }
  sums.flush();
  exact_block_finish(slots, 2, acc, out);
}

// histogram/quantiser.py's fixed_point_scale on the device, column c = threadIdx.x of two:
// R = the smallest power of two >= sums[c] (1 for 0, and for NaN, which check_finite
// reports once the host reads the sums), scale = R / 2^62, inv = 1 / scale.
__global__ void fixed_point_scales(const double* __restrict__ sums, double* __restrict__ scale,
                                   double* __restrict__ inv) {
  const int c = threadIdx.x;
  if (c >= 2) return;
  const double s = sums[c];
  double r = 1.0;
  if (s > 0.0) {
    int e;
    const double m = frexp(s, &e);
    r = ldexp(1.0, m == 0.5 ? e - 1 : e);
  }
  scale[c] = r / 4611686018427387904.0;
  inv[c] = 1.0 / scale[c];
}

// The pairs' fixed-point values trunc(double(g) * inv_scale[c]) (histogram/cuda.py's
// FixedGradients, as histogram.cu converts them): out[i] for value i of the (n, 2) pairs.
__global__ void to_fixed(const float* __restrict__ values, long long n, const double* __restrict__ inv_scale,
                         long long* __restrict__ out) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    out[i] = (long long)((double)values[i] * inv_scale[i & 1]);
  }
}

// out[c] (zeroed) += the sum over the n pairs of column c's fixed-point values (to_fixed's),
// wrapping in two's complement: exact in any order.
__global__ void fixed_sums(const float2* __restrict__ gpair, long long n, const double* __restrict__ inv_scale,
                           unsigned long long* __restrict__ out) {
  const double ig = inv_scale[0], ih = inv_scale[1];
  unsigned long long g = 0, h = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const float2 p = gpair[i];
    g += (unsigned long long)(long long)((double)p.x * ig);
    h += (unsigned long long)(long long)((double)p.y * ih);
  }
  warp_add_to(&out[0], g);
  warp_add_to(&out[1], h);
}

// out[c] (zeroed) += the sum of column c of n int64 pairs (a histogram's bins, fixed-point pairs).
__global__ void pair_sums(const long long* __restrict__ pairs, long long n, unsigned long long* __restrict__ out) {
  unsigned long long a = 0, b = 0;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    a += (unsigned long long)pairs[2 * i];
    b += (unsigned long long)pairs[2 * i + 1];
  }
  warp_add_to(&out[0], a);
  warp_add_to(&out[1], b);
}
