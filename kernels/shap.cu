// What a prediction is made of (explain/cuda.py): exact TreeSHAP contributions over root-to-leaf
// paths, Saabas's approximation, and the leaf each tree sends a row to.
#include "common.cuh"

// The most elements a path may have here (its bias element and one per distinct feature);
// explain/cuda.py sends longer paths to the numpy path.
constexpr int kMaxPathElements = 64;

__device__ __forceinline__ bool is_missing(float v, float missing) { return isnan(v) || v == missing; }

// Paths (explain/paths.py): path p owns elements offsets[p]:offsets[p+1], the first the bias
// element; a row follows element k when its value of feature[k] lies in [lower[k], upper[k]),
// or is missing and missing_follows[k]. phi: (n_rows, n_features + 1) float64, updated: one
// thread per row adds every path's SHAP values in path order, with the operations of
// explain/reference.py's shap_contributions in the same order (so both agree to the last bit
// under --fmad=false).
// Launch: 1-D, one thread per row.
extern "C" __global__ void shap_contribs(const float* __restrict__ X, long long n_rows, int n_features,
                                         const long long* __restrict__ offsets, int n_paths,
                                         const int* __restrict__ feature, const float* __restrict__ lower,
                                         const float* __restrict__ upper,
                                         const signed char* __restrict__ missing_follows,
                                         const double* __restrict__ zero_fraction, const float* __restrict__ value,
                                         float missing, double* __restrict__ phi) {
  const long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= n_rows) return;
  const float* x = X + row * (long long)n_features;
  double* out = phi + row * (long long)(n_features + 1);
  double pw[kMaxPathElements];
  double one[kMaxPathElements];
  for (int p = 0; p < n_paths; ++p) {
    const long long s = offsets[p];
    const int length = (int)(offsets[p + 1] - s);
    // EXTEND, element after element (the bias element: pw = [1]).
    pw[0] = 1.0;
    one[0] = 1.0;
    for (int d = 1; d < length; ++d) {
      const long long e = s + d;
      const float v = x[feature[e]];
      const bool follows = is_missing(v, missing) ? missing_follows[e] != 0 : (v >= lower[e] && v < upper[e]);
      const double o = follows ? 1.0 : 0.0;
      const double z = zero_fraction[e];
      one[d] = o;
      pw[d] = 0.0;
      for (int i = d - 1; i >= 0; --i) {
        pw[i + 1] += o * pw[i] * (double)(i + 1) / (double)(d + 1);
        pw[i] = z * pw[i] * (double)(d - i) / (double)(d + 1);
      }
    }
    const double leaf = (double)value[p];
    const int depth = length - 1;
    // UNWIND each element in turn: the sum of the weights without it.
    for (int k = 1; k < length; ++k) {
      const double o = one[k];
      const double z = zero_fraction[s + k];
      double total = 0.0;
      double next_one = pw[depth];
      for (int i = depth - 1; i >= 0; --i) {
        if (o != 0.0) {
          const double tmp = next_one * (double)(depth + 1) / ((double)(i + 1) * o);
          total = total + tmp;
          next_one = pw[i] - tmp * z * (double)(depth - i) / (double)(depth + 1);
        } else if (z != 0.0) {
          total = total + (pw[i] / z) / ((double)(depth - i) / (double)(depth + 1));
        }
      }
      out[feature[s + k]] += total * (o - z) * leaf;
    }
    double bias = leaf;
    for (int k = 1; k < length; ++k) bias = bias * zero_fraction[s + k];
    out[n_features] += bias;
  }
}

// A row's walk down one tree: the next node (left/right by the split, missing values by
// default_left), as predict.cu walks.
__device__ __forceinline__ int next_node(const float* x, const int* left, const int* right, const int* feature,
                                         const float* threshold, const signed char* default_left, int node,
                                         float missing) {
  const float v = x[feature[node]];
  const bool go_left = is_missing(v, missing) ? default_left[node] != 0 : v < threshold[node];
  return go_left ? left[node] : right[node];
}

// Saabas's contributions (XGBoost's approx_contribs): along each row's path in every tree,
// phi[feature] += mean(child) - mean(node); phi[n_features] += the root's mean. Node arrays of
// all trees concatenated, tree t owning nodes tree_offsets[t]:tree_offsets[t+1] (ids within
// a tree), mean: explain/paths.py's node_means. phi as shap_contribs'.
extern "C" __global__ void saabas_contribs(const float* __restrict__ X, long long n_rows, int n_features,
                                           const long long* __restrict__ tree_offsets, int n_trees,
                                           const int* __restrict__ left, const int* __restrict__ right,
                                           const int* __restrict__ feature, const float* __restrict__ threshold,
                                           const signed char* __restrict__ default_left,
                                           const double* __restrict__ mean, float missing,
                                           double* __restrict__ phi) {
  const long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= n_rows) return;
  const float* x = X + row * (long long)n_features;
  double* out = phi + row * (long long)(n_features + 1);
  for (int t = 0; t < n_trees; ++t) {
    const long long a = tree_offsets[t];
    const int *l = left + a, *r = right + a, *f = feature + a;
    const float* thr = threshold + a;
    const signed char* dl = default_left + a;
    const double* m = mean + a;
    out[n_features] += m[0];
    int node = 0;
    while (l[node] >= 0) {
      const int child = next_node(x, l, r, f, thr, dl, node, missing);
      out[f[node]] += m[child] - m[node];
      node = child;
    }
  }
}

// out[row, t] = the leaf (its id within tree t) that tree t sends the row to; out: (n_rows,
// n_trees) int32. Node arrays as saabas_contribs'.
extern "C" __global__ void leaf_index(const float* __restrict__ X, long long n_rows, int n_features,
                                      const long long* __restrict__ tree_offsets, int n_trees,
                                      const int* __restrict__ left, const int* __restrict__ right,
                                      const int* __restrict__ feature, const float* __restrict__ threshold,
                                      const signed char* __restrict__ default_left, float missing,
                                      int* __restrict__ out) {
  const long long row = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= n_rows) return;
  const float* x = X + row * (long long)n_features;
  for (int t = 0; t < n_trees; ++t) {
    const long long a = tree_offsets[t];
    int node = 0;
    while (left[a + node] >= 0) {
      node = next_node(x, left + a, right + a, feature + a, threshold + a, default_left + a, node, missing);
    }
    out[row * (long long)n_trees + t] = node;
  }
}
