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
// nodes: (n_nodes, 4) int32 rows (left, right, feature, bin), left < 0 for a leaf;
// default_left: (n_nodes,) int8. Launch: 1-D, any shape (grid-stride over rows).
template <bool kDense>
__global__ void add_leaf_values(const EllpackView ell, long long n_rows, const int4* __restrict__ nodes,
                                const int8_t* __restrict__ default_left, const float* __restrict__ value,
                                float* __restrict__ margin, long long margin_stride) {
  const uint32_t* __restrict__ words = ell.words;
  const int bits = ell.bits, row_stride = ell.row_stride;
  const uint32_t null_symbol = ell.null_symbol;
  const int32_t* __restrict__ ptrs = ell.ptrs;
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long row = blockIdx.x * (long long)blockDim.x + threadIdx.x; row < n_rows; row += stride) {
    const unsigned long long begin = (unsigned long long)row * (unsigned long long)row_stride;
    int nid = 0;
    int4 node = nodes[0];
    while (node.x >= 0) {
      const int b = ellpack_feature_bin<kDense>(words, bits, begin, row_stride, null_symbol, ptrs, node.z);
      const bool left = b < 0 ? default_left[nid] != 0 : b <= node.w;
      nid = left ? node.x : node.y;
      node = nodes[nid];
    }
    margin[row * margin_stride] += value[nid];
  }
}

#ifdef DASKGB_NVCC_CHECK  // offline compile check; NVRTC instantiates through name_expressions
template __global__ void add_leaf_values<true>(const EllpackView, long long, const int4*, const int8_t*, const float*,
                                               float*, long long);
template __global__ void add_leaf_values<false>(const EllpackView, long long, const int4*, const int8_t*,
                                                const float*, float*, long long);
#endif
