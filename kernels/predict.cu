// Margins of raw feature rows from flattened trees (predict/cuda.py predict_margin), and of
// quantised rows from one tree routed by bins (predict/cuda.py add_leaf_values).
//
// One thread per row walks every tree in order and adds the leaf values to a float
// accumulator, in the order predict/reference.py's predict_margin adds them, so both give
// the same float32 result.
#include "common.cuh"

// X: row-major (n_rows, n_features) float32. nodes: PredictNode of all trees,
// tree t owning nodes[offsets[t]:offsets[t+1]]. out: (n_rows,) float32, updated.
// Launch: 1-D, any shape (grid-stride over rows).
__global__ void predict_margin(const float* __restrict__ X, long long n_rows, int n_features,
                               const PredictNode* __restrict__ nodes, const int32_t* __restrict__ offsets,
                               int n_trees, float missing, float* __restrict__ out) {
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long row = blockIdx.x * (long long)blockDim.x + threadIdx.x; row < n_rows; row += stride) {
    const float* x = X + row * (long long)n_features;
    float acc = out[row];
    for (int t = 0; t < n_trees; ++t) {
      const PredictNode* tree = nodes + offsets[t];
      int nid = 0;
      while (tree[nid].left >= 0) {
        const PredictNode& node = tree[nid];
        const float v = x[node.feature];
        // With missing == NaN the equality is always false, so one test covers both cases.
        const bool left = (isnan(v) || v == missing) ? node.default_left != 0 : v < node.threshold;
        nid = left ? node.left : node.right;
      }
      acc += tree[nid].value;
    }
    out[row] = acc;
  }
}

// margin[row * margin_stride] += value[leaf of the row] for the rows of an ELLPACK matrix
// binned with the training cuts: one thread per row walks the tree by bins, as training's
// partition sends rows (bin <= split bin goes left, a missing value takes default_left).
// tree: growth.cu's layout, int32 rows of `cap` words each (TreeField: left < 0 for a leaf,
// value as float bits): a tree grown on the device is read where it was grown, and a host
// tree is uploaded in the same layout (predict/cuda.py). Launch: 1-D, any shape
// (grid-stride over rows).
template <bool kDense>
__global__ void add_leaf_values(const EllpackView ell, long long n_rows, const int32_t* __restrict__ tree,
                                long long cap, float* __restrict__ margin, long long margin_stride) {
  const uint32_t* __restrict__ words = ell.words;
  const int bits = ell.bits, row_stride = ell.row_stride;
  const uint32_t null_symbol = ell.null_symbol;
  const int32_t* __restrict__ ptrs = ell.ptrs;
  const int32_t* __restrict__ left_of = tree + kLeft * cap;
  const int32_t* __restrict__ right_of = tree + kRight * cap;
  const int32_t* __restrict__ feature_of = tree + kFeature * cap;
  const int32_t* __restrict__ bin_of = tree + kBin * cap;
  const int32_t* __restrict__ default_left_of = tree + kDefaultLeft * cap;
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long row = blockIdx.x * (long long)blockDim.x + threadIdx.x; row < n_rows; row += stride) {
    const unsigned long long begin = (unsigned long long)row * (unsigned long long)row_stride;
    int nid = 0;
    int left_child = left_of[0];
    while (left_child >= 0) {
      const int b = ellpack_feature_bin<kDense>(words, bits, begin, row_stride, null_symbol, ptrs, feature_of[nid]);
      const bool left = b < 0 ? default_left_of[nid] != 0 : b <= bin_of[nid];
      nid = left ? left_child : right_of[nid];
      left_child = left_of[nid];
    }
    margin[row * margin_stride] += __int_as_float(tree[kValue * cap + nid]);
  }
}

#ifdef DASKGB_NVCC_CHECK  // offline compile check; NVRTC instantiates through name_expressions
template __global__ void add_leaf_values<true>(const EllpackView, long long, const int32_t*, long long, float*,
                                               long long);
template __global__ void add_leaf_values<false>(const EllpackView, long long, const int32_t*, long long, float*,
                                                long long);
#endif
