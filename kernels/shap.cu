// What a prediction is made of (explain/cuda.py): exact TreeSHAP contributions over root-to-leaf
// paths, Saabas's approximation, and the leaf each tree sends a row to.
#include "common.cuh"

// Paths of up to kMax elements (the bias element and one per distinct feature) keep their
// weights in registers: every loop below is unrolled to kMax, so each index is a constant.
// explain/cuda.py picks kMax from the longest path (8, 16 or 32) and sends longer paths to
// the numpy path.
__device__ __forceinline__ bool is_missing(float v, float missing) { return isnan(v) || v == missing; }

// A category condition's header (explain/paths.py): its word count, and above it the rest bit.
constexpr uint32_t kRestBit = 1u << 31;

// Whether a present value meets the category condition cond = [header, words...] of a path
// element (explain/paths.py): its category (truncated toward zero) by its bit where the words
// reach it; any other category (beyond the words, or invalid: negative, or from 2**24 on, as
// XGBoost's InvalidCat) by the rest bit.
__device__ __forceinline__ bool category_follows(const uint32_t* __restrict__ cond, float v) {
  const uint32_t header = cond[0];
  const int n_words = (int)(header & ~kRestBit);
  if (v >= 0.0f && v < 16777216.0f) {
    const int c = (int)v;
    if ((c >> 5) < n_words) return in_category_set(cond + 1, n_words, c);
  }
  return (header & kRestBit) != 0u;
}

// 1 / j for j = 1..32 (rounded as the division rounds): the weights' divisions by an index
// that only the path's length fixes become products.
__constant__ double kRecip[33] = {0.0, 1.0 / 1, 1.0 / 2, 1.0 / 3, 1.0 / 4, 1.0 / 5, 1.0 / 6, 1.0 / 7,
    1.0 / 8, 1.0 / 9, 1.0 / 10, 1.0 / 11, 1.0 / 12, 1.0 / 13, 1.0 / 14, 1.0 / 15, 1.0 / 16, 1.0 / 17,
    1.0 / 18, 1.0 / 19, 1.0 / 20, 1.0 / 21, 1.0 / 22, 1.0 / 23, 1.0 / 24, 1.0 / 25, 1.0 / 26, 1.0 / 27,
    1.0 / 28, 1.0 / 29, 1.0 / 30, 1.0 / 31, 1.0 / 32};

// EXTEND of every element of the path whose elements start at s (its bias element first):
// the path's weights into pw, and the bits of the elements the row x follows (bit k: element k).
// kCategorical: an element with a category condition (category_at[e] >= 0, its offset in
// category_sets) also asks it of a present value; without the flag neither array is read.
template <int kMax, bool kCategorical>
__device__ __forceinline__ unsigned extend_path(double (&pw)[kMax], const float* x, long long s, int length,
                                                const int* __restrict__ feature, const float* __restrict__ lower,
                                                const float* __restrict__ upper,
                                                const signed char* __restrict__ missing_follows,
                                                const double* __restrict__ zero_fraction,
                                                const long long* __restrict__ category_at,
                                                const uint32_t* __restrict__ category_sets, float missing) {
  unsigned follows = 0u;
  pw[0] = 1.0;
#pragma unroll
  for (int d = 1; d < kMax; ++d) {
    if (d < length) {
      const long long e = s + d;
      const float v = x[feature[e]];
      bool f;
      if (is_missing(v, missing)) {
        f = missing_follows[e] != 0;
      } else {
        f = v >= lower[e] && v < upper[e];
        if constexpr (kCategorical) {
          const long long at = category_at[e];
          if (at >= 0) f = f && category_follows(category_sets + at, v);
        }
      }
      follows |= (unsigned)f << d;
      const double o = f ? 1.0 : 0.0;
      const double z = zero_fraction[e];
      const double inv = 1.0 / (double)(d + 1);
      pw[d] = 0.0;
#pragma unroll
      for (int i = kMax - 2; i >= 0; --i) {
        if (i < d) {
          pw[i + 1] = pw[i + 1] + o * pw[i] * (double)(i + 1) * inv;
          pw[i] = z * pw[i] * (double)(d - i) * inv;
        }
      }
    }
  }
  return follows;
}

// pw[j], read with constant indices (a runtime index would move pw out of registers).
template <int kMax>
__device__ __forceinline__ double weight_at(const double (&pw)[kMax], int j) {
  double out = 0.0;
#pragma unroll
  for (int i = 0; i < kMax; ++i) {
    if (i == j) out = pw[i];
  }
  return out;
}

// The sum of the weights pw of a path of `depth` with the element (o, z) unwound (XGBoost's
// UnwoundPathSum); top = pw[depth].
template <int kMax>
__device__ __forceinline__ double unwound_sum(const double (&pw)[kMax], int depth, double top, bool o, double z) {
  double total = 0.0;
  if (o) {
    const double inv_top = kRecip[depth + 1];
    double next_one = top;
#pragma unroll
    for (int i = kMax - 2; i >= 0; --i) {
      if (i < depth) {
        const double tmp = next_one * (double)(depth + 1) * (1.0 / (double)(i + 1));
        total = total + tmp;
        next_one = pw[i] - tmp * z * (double)(depth - i) * inv_top;
      }
    }
  } else if (z != 0.0) {
    const double inv_z = 1.0 / z;
#pragma unroll
    for (int i = kMax - 2; i >= 0; --i) {
      if (i < depth) total = total + pw[i] * inv_z * (double)(depth + 1) * kRecip[depth - i];
    }
  }
  return total;
}

// Paths (explain/paths.py): path p owns elements offsets[p]:offsets[p+1], the first the bias
// element; a row follows element k when its value of feature[k] lies in [lower[k], upper[k]),
// or is missing and missing_follows[k]. phi: (n_rows, n_features + 1) float64, updated: one
// thread per row adds every path's SHAP values in path order, with the operations of
// explain/reference.py's shap_contributions in the same order (so both agree to the last bit
// under --fmad=false). The one fractions are 0 or 1, so the only division left is 1 / zero
// fraction, once an element; the others are products by the constants 1 / j.
// kShared: the block's rows' sums live in shared memory (feature-major: thread t's sum of
// feature f at f * blockDim.x + t, no bank conflicts) and are added to phi at the end; the
// host chooses it where blockDim.x * (n_features + 1) doubles fit.
// kCategorical: the paths have category conditions (category_at, category_sets: extend_path);
// without it the walk is the numeric one and neither array is read.
// Launch: 1-D, one thread per row.
template <int kMax, bool kShared, bool kCategorical>
__global__ void shap_contribs(const float* __restrict__ X, long long n_rows, int n_features,
                              const long long* __restrict__ offsets, int n_paths,
                              const int* __restrict__ feature, const float* __restrict__ lower,
                              const float* __restrict__ upper, const signed char* __restrict__ missing_follows,
                              const double* __restrict__ zero_fraction, const float* __restrict__ value,
                              const long long* __restrict__ category_at, const uint32_t* __restrict__ category_sets,
                              float missing, double* __restrict__ phi) {
  extern __shared__ double block_sums[];
  const long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  const bool live = row < n_rows;
  const float* x = X + (live ? row : 0) * (long long)n_features;
  double* out = phi + (live ? row : 0) * (long long)(n_features + 1);
  const int stride = kShared ? (int)blockDim.x : 1;
  double* sums = kShared ? block_sums + threadIdx.x : out;
  if (kShared) {
    for (int f = 0; f <= n_features; ++f) sums[f * stride] = 0.0;
  }
  if (!live) return;  // no __syncthreads below: each thread owns its own sums
  for (int p = 0; p < n_paths; ++p) {
    const long long s = offsets[p];
    const int length = (int)(offsets[p + 1] - s);
    const int depth = length - 1;
    double pw[kMax];
    const unsigned follows = extend_path<kMax, kCategorical>(pw, x, s, length, feature, lower, upper,
                                                             missing_follows, zero_fraction, category_at,
                                                             category_sets, missing);
    const double leaf = (double)value[p];
    const double top = weight_at<kMax>(pw, depth);
    double bias = leaf;
#pragma unroll
    for (int k = 1; k < kMax; ++k) {
      if (k < length) {
        const bool o = (follows >> k) & 1u;
        const double z = zero_fraction[s + k];
        bias = bias * z;
        const double total = unwound_sum<kMax>(pw, depth, top, o, z);
        sums[feature[s + k] * stride] += total * ((o ? 1.0 : 0.0) - z) * leaf;
      }
    }
    sums[n_features * stride] += bias;
  }
  if (kShared) {
    for (int f = 0; f <= n_features; ++f) out[f] += sums[f * stride];
  }
}

// SHAP interactions (explain/reference.py's shap_interactions, the same operations in the same
// order): inter[row, i, j] += half the change of feature j's value when feature i is known,
// path by path: for each element e, the path's weights with e unwound, and each other
// element's unwound sum of those. inter: (n_rows, n_features + 1, n_features + 1) float64,
// updated in global memory (a row's pairs do not fit on chip); its diagonal is left to the
// caller. kCategorical as shap_contribs'. Launch: 1-D, one thread per row.
template <int kMax, bool kCategorical>
__global__ void shap_interactions(const float* __restrict__ X, long long n_rows, int n_features,
                                  const long long* __restrict__ offsets, int n_paths,
                                  const int* __restrict__ feature, const float* __restrict__ lower,
                                  const float* __restrict__ upper, const signed char* __restrict__ missing_follows,
                                  const double* __restrict__ zero_fraction, const float* __restrict__ value,
                                  const long long* __restrict__ category_at,
                                  const uint32_t* __restrict__ category_sets, float missing,
                                  double* __restrict__ inter) {
  const long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= n_rows) return;
  const float* x = X + row * (long long)n_features;
  const long long width = n_features + 1;
  double* out = inter + row * width * width;
  for (int p = 0; p < n_paths; ++p) {
    const long long s = offsets[p];
    const int length = (int)(offsets[p + 1] - s);
    if (length < 3) continue;
    const int depth = length - 1;
    double pw[kMax];
    const unsigned follows = extend_path<kMax, kCategorical>(pw, x, s, length, feature, lower, upper,
                                                             missing_follows, zero_fraction, category_at,
                                                             category_sets, missing);
    const double top = weight_at<kMax>(pw, depth);
    const double leaf = (double)value[p];
    const double inv_top = kRecip[depth + 1];
    const int d2 = depth - 1;
    for (int e = 1; e < length; ++e) {
      const bool oe = (follows >> e) & 1u;
      const double ze = zero_fraction[s + e];
      const double inv_ze = ze != 0.0 ? 1.0 / ze : 0.0;
      double pw2[kMax];
      double next_one = top;
#pragma unroll
      for (int i = kMax - 2; i >= 0; --i) {
        if (i < depth) {
          const double with_one = next_one * (double)(depth + 1) * (1.0 / (double)(i + 1));
          const double without = pw[i] * (double)(depth + 1) * inv_ze * kRecip[depth - i];
          pw2[i] = oe ? with_one : without;
          if (oe) next_one = pw[i] - pw2[i] * ze * (double)(depth - i) * inv_top;
        }
      }
      const double top2 = weight_at<kMax>(pw2, d2);
      const double scale = ((oe ? 1.0 : 0.0) - ze) * 0.5 * leaf;
      double* row_e = out + (long long)feature[s + e] * width;
#pragma unroll
      for (int k = 1; k < kMax; ++k) {
        if (k < length && k != e) {
          const bool ok = (follows >> k) & 1u;
          const double zk = zero_fraction[s + k];
          const double total = unwound_sum<kMax>(pw2, d2, top2, ok, zk);
          row_e[feature[s + k]] += total * ((ok ? 1.0 : 0.0) - zk) * scale;
        }
      }
    }
  }
}

// Whether a raw feature value is in a split's category set as XGBoost's AsCat reads it
// (predict.cu's value_in_category_set): truncated toward zero; a negative value, or one past
// float32's exact integers (2**24), is in no set. set: [n_words, word 0, word 1, ...]
// (category_sets.counted, as predict/cuda.py walk_records lays them out).
__device__ __forceinline__ bool value_in_category_set(const uint32_t* __restrict__ set, float v) {
  return v >= 0.0f && v < 16777216.0f && in_category_set(set + 1, (int)__ldg(set), (int)v);
}

// A row's walk down one tree: the next node (left/right by the split, missing values by
// default_left), as predict.cu walks. kCategorical: a node with category_at[node] >= 0 is a
// categorical split whose set is at that offset of category_sets; a present value goes right
// iff its category is in it. Without the flag neither array is read.
template <bool kCategorical>
__device__ __forceinline__ int next_node(const float* x, const int* left, const int* right, const int* feature,
                                         const float* threshold, const signed char* default_left,
                                         const int* category_at, const uint32_t* category_sets, int node,
                                         float missing) {
  const float v = x[feature[node]];
  bool go_left;
  if (is_missing(v, missing)) {
    go_left = default_left[node] != 0;
  } else if (kCategorical && category_at[node] >= 0) {
    go_left = !value_in_category_set(category_sets + category_at[node], v);
  } else {
    go_left = v < threshold[node];
  }
  return go_left ? left[node] : right[node];
}

// Saabas's contributions (XGBoost's approx_contribs): along each row's path in every tree,
// phi[feature] += mean(child) - mean(node); phi[n_features] += the root's mean. Node arrays of
// all trees concatenated, tree t owning nodes tree_offsets[t]:tree_offsets[t+1] (ids within
// a tree), mean: explain/paths.py's node_means. phi as shap_contribs'. category_at (per
// node, -1 for a numeric split) and category_sets: next_node's, read with kCategorical only.
template <bool kCategorical>
__global__ void saabas_contribs(const float* __restrict__ X, long long n_rows, int n_features,
                                const long long* __restrict__ tree_offsets, int n_trees,
                                const int* __restrict__ left, const int* __restrict__ right,
                                const int* __restrict__ feature, const float* __restrict__ threshold,
                                const signed char* __restrict__ default_left, const int* __restrict__ category_at,
                                const uint32_t* __restrict__ category_sets, const double* __restrict__ mean,
                                float missing, double* __restrict__ phi) {
  const long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= n_rows) return;
  const float* x = X + row * (long long)n_features;
  double* out = phi + row * (long long)(n_features + 1);
  for (int t = 0; t < n_trees; ++t) {
    const long long a = tree_offsets[t];
    const int *l = left + a, *r = right + a, *f = feature + a;
    const float* thr = threshold + a;
    const signed char* dl = default_left + a;
    const int* ca = category_at + (kCategorical ? a : 0);
    const double* m = mean + a;
    out[n_features] += m[0];
    int node = 0;
    while (l[node] >= 0) {
      const int child = next_node<kCategorical>(x, l, r, f, thr, dl, ca, category_sets, node, missing);
      out[f[node]] += m[child] - m[node];
      node = child;
    }
  }
}

// out[row, t] = the leaf (its id within tree t) that tree t sends the row to; out: (n_rows,
// n_trees) int32. Node arrays (and kCategorical) as saabas_contribs'.
template <bool kCategorical>
__global__ void leaf_index(const float* __restrict__ X, long long n_rows, int n_features,
                           const long long* __restrict__ tree_offsets, int n_trees,
                           const int* __restrict__ left, const int* __restrict__ right,
                           const int* __restrict__ feature, const float* __restrict__ threshold,
                           const signed char* __restrict__ default_left, const int* __restrict__ category_at,
                           const uint32_t* __restrict__ category_sets, float missing, int* __restrict__ out) {
  const long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= n_rows) return;
  const float* x = X + row * (long long)n_features;
  for (int t = 0; t < n_trees; ++t) {
    const long long a = tree_offsets[t];
    int node = 0;
    while (left[a + node] >= 0) {
      node = next_node<kCategorical>(x, left + a, right + a, feature + a, threshold + a, default_left + a,
                                     category_at + (kCategorical ? a : 0), category_sets, node, missing);
    }
    out[row * (long long)n_trees + t] = node;
  }
}
