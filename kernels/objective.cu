// The objectives' gradients, output transforms, label checks and base-score sums on the device
// (daskgb/objective_cuda.py launches them; daskgb/objective.py's numpy steps are the oracle).
// Every float operation is the one numpy makes, in the same order (no multiply-add:
// --fmad=false), and exp is glibc's expf (expf.cuh), so the gradients equal numpy's bit for bit.
// Where numpy's minimum/maximum propagate NaN, so do these (fminf/fmaxf would drop it).
#include "exact_sum.cuh"
#include "expf.cuh"

constexpr unsigned kFullWarp = 0xffffffffu;

#define GRID_STRIDE(i, n) \
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < (n); i += (long long)gridDim.x * blockDim.x)

__device__ __forceinline__ float nan_min(float a, float b) { return isnan(a) ? a : fminf(a, b); }
__device__ __forceinline__ float nan_max(float a, float b) { return isnan(a) ? a : fmaxf(a, b); }

// XGBoost's Sigmoid: 1 / (exp(min(-x, 88.7)) + 1), in float (objective._sigmoid).
__device__ __forceinline__ float sigmoid_of(float x, const unsigned long long* __restrict__ table) {
  const float e = daskgb_expf(nan_min(-x, 88.7f), table);
  return 1.0f / (e + 1.0f);
}

// binary:logistic / reg:logistic (objective._Logistic.gradient and _pack): gpair[i] =
// ((p - y) * w, max(p (1 - p), 1e-16) * w), w = 1 where weight is null.
__global__ void logistic_gradient(const float* __restrict__ margin, const float* __restrict__ y,
                                  const float* __restrict__ weight, long long n,
                                  const unsigned long long* __restrict__ table, float2* __restrict__ gpair) {
  GRID_STRIDE(i, n) {
    const float p = sigmoid_of(margin[i], table);
    float grad = p - y[i];
    float hess = nan_max(p * (1.0f - p), 1e-16f);
    if (weight) {
      grad = grad * weight[i];
      hess = hess * weight[i];
    }
    gpair[i] = make_float2(grad, hess);
  }
}

// reg:squarederror: gpair[i] = ((m - y) * w, w), (m - y, 1) where weight is null.
__global__ void squared_error_gradient(const float* __restrict__ margin, const float* __restrict__ y,
                                       const float* __restrict__ weight, long long n, float2* __restrict__ gpair) {
  GRID_STRIDE(i, n) {
    const float grad = margin[i] - y[i];
    gpair[i] = weight ? make_float2(grad * weight[i], 1.0f * weight[i]) : make_float2(grad, 1.0f);
  }
}

// objective._pack: pairs (grad * w, hess * w) of a gradient and a hessian (hess null: the
// scalar hess_value for every row), w = 1 where weight is null.
__global__ void pack_gradients(const float* __restrict__ grad, const float* __restrict__ hess, float hess_value,
                               const float* __restrict__ weight, long long n, float2* __restrict__ gpair) {
  GRID_STRIDE(i, n) {
    float g = grad[i], h = hess ? hess[i] : hess_value;
    if (weight) {
      g = g * weight[i];
      h = h * weight[i];
    }
    gpair[i] = make_float2(g, h);
  }
}

__global__ void sigmoid(const float* __restrict__ x, long long n, const unsigned long long* __restrict__ table,
                        float* __restrict__ out) {
  GRID_STRIDE(i, n) out[i] = sigmoid_of(x[i], table);
}

// numpy's max of a row: NaN if any value is.
__device__ __forceinline__ float row_max(const float* __restrict__ row, int k) {
  float r = row[0];
  for (int j = 1; j < k && !isnan(r); ++j) {
    const float v = row[j];
    if (isnan(v) || v > r) r = v;
  }
  return r;
}

// objective._softmax's denominator: the row's expf(m - shift), added class by class in double.
__device__ __forceinline__ float softmax_sum(const float* __restrict__ row, int k, float shift,
                                             const unsigned long long* __restrict__ table) {
  double s = 0.0;
  for (int j = 0; j < k; ++j) s += (double)daskgb_expf(row[j] - shift, table);
  return (float)s;
}

// multi:softprob's gradient (objective.Softmax.gradient): row i of the (n, k) margins shifted by
// max(max of the row, FLT_MIN), p = expf / the row's sum; gpair[i, j] = (p - [j == y_i],
// 2 p (1 - p)) times w, the hessian then at least 1e-16. gpair: (n, k) pairs.
__global__ void softmax_gradient(const float* __restrict__ margin, const float* __restrict__ y,
                                 const float* __restrict__ weight, long long n, int k,
                                 const unsigned long long* __restrict__ table, float2* __restrict__ gpair) {
  GRID_STRIDE(i, n) {
    const float* row = margin + i * k;
    const float shift = nan_max(row_max(row, k), 1.17549435e-38f);  // std::numeric_limits<float>::min()
    const float total = softmax_sum(row, k, shift, table);
    const long long label = (long long)y[i];
    for (int j = 0; j < k; ++j) {
      const float p = daskgb_expf(row[j] - shift, table) / total;
      float grad = label == j ? p - 1.0f : p;
      float hess = 2.0f * p * (1.0f - p);
      if (weight) {
        grad = grad * weight[i];
        hess = hess * weight[i];
      }
      gpair[i * k + j] = make_float2(grad, nan_max(hess, 1e-16f));
    }
  }
}

// multi:softprob's output (objective.Softmax.eval_transform): each row's probabilities, the
// margins shifted by the row's max.
__global__ void softmax(const float* __restrict__ margin, long long n, int k,
                        const unsigned long long* __restrict__ table, float* __restrict__ out) {
  GRID_STRIDE(i, n) {
    const float* row = margin + i * k;
    const float shift = row_max(row, k);
    const float total = softmax_sum(row, k, shift, table);
    for (int j = 0; j < k; ++j) out[i * k + j] = daskgb_expf(row[j] - shift, table) / total;
  }
}

// multi:softmax's output: the class of each row's largest margin as a float (numpy's argmax:
// the first of tied maxima, the first NaN if any).
__global__ void argmax_rows(const float* __restrict__ margin, long long n, int k, float* __restrict__ out) {
  GRID_STRIDE(i, n) {
    const float* row = margin + i * k;
    int best = 0;
    float v = row[0];
    for (int j = 1; j < k && !isnan(v); ++j) {
      if (isnan(row[j]) || row[j] > v) {
        best = j;
        v = row[j];
      }
    }
    out[i] = (float)best;
  }
}

// Labels an objective refuses (objective.py's check_labels), by kind:
enum LabelRule {
  kNotBinary = 0,       // binary:logistic: neither 0 nor 1
  kOutsideUnit = 1,     // reg:logistic: below 0 or above 1
  kNegative = 2,        // the log-link objectives
  kNotPositive = 3,     // reg:gamma
  kNotClass = 4,        // multiclass: not an integer in [0, num_class)
};

template <int kRule>
__device__ __forceinline__ bool label_refused(float y, float n_classes) {
  if (kRule == kNotBinary) return y != 0.0f && y != 1.0f;
  if (kRule == kOutsideUnit) return y < 0.0f || y > 1.0f;
  if (kRule == kNegative) return y < 0.0f;
  if (kRule == kNotPositive) return y <= 0.0f;
  return y < 0.0f || y >= n_classes || y != floorf(y);
}

// *count (zeroed) += the labels rule kRule refuses.
template <int kRule>
__global__ void count_refused_labels(const float* __restrict__ y, long long n, float n_classes,
                                     unsigned long long* __restrict__ count) {
  unsigned long long c = 0;
  GRID_STRIDE(i, n) c += label_refused<kRule>(y[i], n_classes);
  for (int o = 16; o > 0; o >>= 1) c += __shfl_down_sync(kFullWarp, c, o);
  if ((threadIdx.x & 31) == 0 && c) atomicAdd(count, c);
}

// Objective.base_score_sums: out = (sum w y, sum w), or (sum y, n) where weight is null, each
// the double nearest the exact sum (exact_sum.cuh). acc: 2 * kExactSlots + 1 zeroed int64.
__global__ void label_sums(const float* __restrict__ y, const float* __restrict__ weight, long long n,
                           long long* __restrict__ acc, double* __restrict__ out) {
  __shared__ long long slots[2 * kExactSlots];
  exact_block_start(slots, 2 * kExactSlots);
  ExactSums<2> sums(slots);
  GRID_STRIDE(i, n) {
    if (weight) {
      sums.add_product<0>(weight[i], y[i]);
      sums.add_float<1>(weight[i]);
    } else {
      sums.add_float<0>(y[i]);
      sums.add_float<1>(1.0f);
    }
  }
  sums.flush();
  exact_block_finish(slots, 2, acc, out);
}

// Softmax.base_score_sums: out[c] = the weight of the rows of class c (their count where
// weight is null), out[k] = all rows' weight, each exact then rounded once. kShared: the
// k + 1 sums fit a block's shared memory (dynamic, (k + 1) * kExactSlots int64), else the
// terms go to the global sums straight. acc: (k + 1) * kExactSlots + 1 zeroed int64.
template <bool kShared>
__global__ void class_weight_sums(const float* __restrict__ y, const float* __restrict__ weight, long long n, int k,
                                  long long* __restrict__ acc, double* __restrict__ out) {
  extern __shared__ long long dynamic_slots[];
  long long* slots = kShared ? dynamic_slots : acc;
  if (kShared) exact_block_start(slots, (k + 1) * kExactSlots);
  GRID_STRIDE(i, n) {
    const float w = weight ? weight[i] : 1.0f;
    const long long c = (long long)y[i];
    if (c >= 0 && c < k) exact_add_float_to(slots + c * kExactSlots, w);
    exact_add_float_to(slots + (long long)k * kExactSlots, w);
  }
  if (kShared) {
    exact_block_finish(slots, k + 1, acc, out);
    return;
  }
  if (!exact_last_block(acc, k + 1)) return;
  __shared__ long long sum[kExactSlots];
  __shared__ long long carried[kExactCarried];
  for (int a = 0; a <= k; ++a) {
    for (int j = threadIdx.x; j < kExactSlots; j += blockDim.x) sum[j] = __ldcg(&acc[(long long)a * kExactSlots + j]);
    __syncthreads();
    if (threadIdx.x == 0) out[a] = exact_round(sum, carried);
    __syncthreads();
  }
}
