// Margins of raw feature rows from flattened trees (cupy_backend.predict_margin).
//
// One thread per row walks every tree in order and adds the leaf values to a float
// accumulator, in the order numpy_backend.predict_margin adds them, so both give
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
