// Evaluation metrics on the device (daskgb/metric_cuda.py launches them; daskgb/metric.py's
// array steps are the oracle): each row's term is computed with numpy's double operations in
// numpy's order, and the sums are exact_sum.cuh's (the double nearest the exact sum, whatever
// the order), so a metric differs from numpy's only by numpy's own rounding of its sums.
#include "exact_sum.cuh"

#define GRID_STRIDE(i, n) \
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (n); i += (long long)gridDim.x * blockDim.x)

__device__ __forceinline__ double nan_max(double a, double b) { return isnan(a) ? a : fmax(a, b); }

// The additive metrics (metric.py's _ADDITIVE): one row's term, before its weight.
enum AdditiveMetric { kRmse = 0, kLogloss = 1, kError = 2, kMae = 3 };

template <int kMetric>
__device__ __forceinline__ double metric_term(float y, float pred, double w) {
  const double yy = (double)y, p = (double)pred;
  if (kMetric == kRmse) {
    const double d = p - yy;
    return w * d * d;
  }
  if (kMetric == kLogloss) {
    const double eps = 1e-16;
    const double loss = -(yy * log(nan_max(p, eps)) + (1.0 - yy) * log(nan_max(1.0 - p, eps)));
    return w * loss;
  }
  if (kMetric == kError) return w * ((pred > 0.5f ? 1.0 : 0.0) != yy ? 1.0 : 0.0);
  return w * fabs(p - yy);
}

// out = (sum of the rows' weighted terms, sum of the weights (n where weight is null)).
// acc: 2 * kExactSlots + 1 zeroed int64.
template <int kMetric>
__global__ void metric_sums(const float* __restrict__ y, const float* __restrict__ pred,
                            const float* __restrict__ weight, long long n, long long* __restrict__ acc,
                            double* __restrict__ out) {
  __shared__ long long slots[2 * kExactSlots];
  exact_block_start(slots, 2 * kExactSlots);
  ExactSums<2> sums(slots);
  GRID_STRIDE(i, n) {
    const float w = weight ? weight[i] : 1.0f;
    sums.add_double<0>(metric_term<kMetric>(y[i], pred[i], (double)w));
    sums.add_float<1>(w);
  }
  sums.flush();
  exact_block_finish(slots, 2, acc, out);
}

// ---------------------------------------------------------------------------- AUC
// metric._auc_parts: the rows by descending prediction, the running positive and negative
// weights tp and fp, and a trapezoid per tie group between the groups' last positions.

// The sort keys: the rows by descending prediction, as metric._sorted_descending's ascending
// sort of -double(pred), packed with the row so that sorting the keys in place (CuPy's
// ndarray.sort: thrust, no copy to compile, unlike argsort's) gives the order: the high 32 bits
// are -pred as an unsigned integer of the same order (NaN last, as CuPy's and numpy's sorts put
// it; -0 as 0), the low 32 the row (n < 2^32), which orders the rows of a tie as a stable sort.
// Bit operations throughout, not float ones: the module is compiled flush-to-zero (CuPy's
// -ftz=true), under which a float negation or comparison takes a subnormal for 0.
__global__ void auc_sort_keys(const float* __restrict__ pred, long long n, unsigned long long* __restrict__ keys) {
  GRID_STRIDE(i, n) {
    unsigned b = __float_as_uint(pred[i]) ^ 0x80000000u;  // -pred
    if ((b & 0x7fffffffu) == 0u) b = 0u;
    b = (b & 0x7fffffffu) > 0x7f800000u ? 0xffffffffu : ((b >> 31) ? ~b : (b | 0x80000000u));
    keys[i] = ((unsigned long long)b << 32) | (unsigned long long)i;
  }
}

// a == b as numpy compares floats (NaN equal to nothing, -0 to 0, a subnormal to itself only),
// from the bits: flush-to-zero would make a float comparison take subnormals for 0.
__device__ __forceinline__ bool same_prediction(float a, float b) {
  const unsigned x = __float_as_uint(a), y = __float_as_uint(b);
  if ((x & 0x7fffffffu) > 0x7f800000u || (y & 0x7fffffffu) > 0x7f800000u) return false;
  return x == y || ((x | y) & 0x7fffffffu) == 0u;
}

// Position i of the sorted rows (row = the low 32 bits of keys[i]): tp_terms[i] = w y,
// fp_terms[i] = w (1 - y), and ends[i] = i where i is the last position of its tie group, else -1.
__global__ void auc_terms(const unsigned long long* __restrict__ keys, const float* __restrict__ y,
                          const float* __restrict__ pred, const float* __restrict__ weight, long long n,
                          double* __restrict__ tp_terms, double* __restrict__ fp_terms, long long* __restrict__ ends) {
  GRID_STRIDE(i, n) {
    const long long row = (long long)(keys[i] & 0xffffffffull);
    const double yy = (double)y[row], w = weight ? (double)weight[row] : 1.0;
    tp_terms[i] = w * yy;
    fp_terms[i] = w * (1.0 - yy);
    ends[i] = (i == n - 1 || !same_prediction(pred[row], pred[(long long)(keys[i + 1] & 0xffffffffull)])) ? i : -1;
  }
}

// out[0] = the area: over the tie groups' last positions i, (fp[i] - fp[j]) (tp[i] + tp[j]) / 2,
// j the previous group's last position (tp, fp = 0 before the first), summed exactly;
// out[1] = tp[n - 1] fp[n - 1]. last_end: the inclusive max-scan of auc_terms' ends (so
// last_end[i] == i at a group's last position). acc: kExactSlots + 1 zeroed int64.
__global__ void auc_area(const double* __restrict__ tp, const double* __restrict__ fp,
                         const long long* __restrict__ last_end, long long n, long long* __restrict__ acc,
                         double* __restrict__ out) {
  __shared__ long long slots[kExactSlots];
  exact_block_start(slots, kExactSlots);
  ExactSums<1> sums(slots);
  GRID_STRIDE(i, n) {
    if (last_end[i] != i) continue;
    const long long j = i > 0 ? last_end[i - 1] : -1;
    const double tp0 = j >= 0 ? tp[j] : 0.0, fp0 = j >= 0 ? fp[j] : 0.0;
    sums.add_double<0>((fp[i] - fp0) * (tp[i] + tp0) / 2.0);
  }
  sums.flush();
  if (blockIdx.x == 0 && threadIdx.x == 0) out[1] = tp[n - 1] * fp[n - 1];
  exact_block_finish(slots, 1, acc, out);
}

// ---------------------------------------------------------------------------- inclusive scans
// A scan in a fixed order (chunks of kScanChunk values, each thread's kScanItems in a row,
// the threads' totals by a Hillis-Steele scan, then the chunks' totals by the same scan): the
// same bits on every launch and every device. The tie ends' max-scan is exact; the running
// weights are exact where the weights are integers (unweighted rows).
constexpr int kScanThreads = 256;
constexpr int kScanItems = 8;
constexpr long long kScanChunk = kScanThreads * kScanItems;

struct SumOfDoubles {
  typedef double T;
  static __device__ __forceinline__ double identity() { return 0.0; }
  static __device__ __forceinline__ double combine(double a, double b) { return a + b; }
};

struct MaxOfIndices {
  typedef long long T;
  static __device__ __forceinline__ long long identity() { return -1; }
  static __device__ __forceinline__ long long combine(long long a, long long b) { return a > b ? a : b; }
};

// out = the inclusive scan of each chunk of `in` (a block a chunk), totals[b] = chunk b's total.
template <class Op>
__global__ void scan_chunks(const typename Op::T* __restrict__ in, typename Op::T* __restrict__ out, long long n,
                            typename Op::T* __restrict__ totals) {
  typedef typename Op::T T;
  __shared__ T part[kScanThreads];
  const long long first = blockIdx.x * kScanChunk + (long long)threadIdx.x * kScanItems;
  T run[kScanItems];
  T acc = Op::identity();
#pragma unroll
  for (int k = 0; k < kScanItems; ++k) {
    const T v = first + k < n ? in[first + k] : Op::identity();
    acc = k == 0 ? v : Op::combine(acc, v);
    run[k] = acc;
  }
  part[threadIdx.x] = acc;
  __syncthreads();
  for (int o = 1; o < kScanThreads; o <<= 1) {
    const T before = threadIdx.x >= o ? part[threadIdx.x - o] : Op::identity();
    __syncthreads();
    if (threadIdx.x >= o) part[threadIdx.x] = Op::combine(before, part[threadIdx.x]);
    __syncthreads();
  }
  const T before = threadIdx.x > 0 ? part[threadIdx.x - 1] : Op::identity();
#pragma unroll
  for (int k = 0; k < kScanItems; ++k) {
    if (first + k < n) out[first + k] = threadIdx.x > 0 ? Op::combine(before, run[k]) : run[k];
  }
  if (threadIdx.x == kScanThreads - 1) totals[blockIdx.x] = part[kScanThreads - 1];
}

// Chunk b >= 1 of out takes the scanned total of the chunks before it: out[i] =
// combine(scanned_totals[b - 1], out[i]).
template <class Op>
__global__ void scan_add(typename Op::T* __restrict__ out, long long n,
                         const typename Op::T* __restrict__ scanned_totals) {
  for (long long i = kScanChunk + blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
       i += (long long)gridDim.x * blockDim.x) {
    out[i] = Op::combine(scanned_totals[i / kScanChunk - 1], out[i]);
  }
}
