// Margins of raw feature rows from flattened trees (predict/cuda.py predict_margin), and of
// quantised rows from one tree routed by bins (predict/cuda.py add_leaf_values).
#include "common.cuh"

// How many trees a thread walks side by side: their node loads are independent, so they
// are in flight together (a walk is a chain of dependent loads, bound by latency).
constexpr int kTreesAtOnce = 4;
// A walk record's feature word: bit 31 default_left, bit 30 a categorical split (features
// stay below 2**30, predict/cuda.py walk_records checks).
constexpr int kCategoricalBit = 1 << 30;

// Whether a raw feature value is in a category set as XGBoost's AsCat reads it: truncated
// toward zero; a negative value, or one past float32's exact integers (2**24, XGBoost's
// InvalidCat), is in no set. set: [n_words, word 0, word 1, ...] (predict/cuda.py walk_records).
__device__ __forceinline__ bool value_in_category_set(const uint32_t* __restrict__ set, float v) {
  return v >= 0.0f && v < 16777216.0f && in_category_set(set + 1, (int)__ldg(set), (int)v);
}

// X: row-major (n_rows, n_features) float32. nodes: every tree's nodes as int4 records
// (left, right, feature | default_left << 31, threshold, or the value for a leaf, as float
// bits; left < 0 for a leaf), tree t owning nodes[offsets[t]:offsets[t+1]]. out: (n_rows,)
// float32, updated: one thread per row adds every tree's leaf value in tree order, as
// predict/reference.py's predict_margin adds them, so both give the same float32 result.
// kShared: the block's rows are first copied to shared memory (one coalesced read of the
// block's contiguous rows) and the walks read them there; the host chooses it where
// blockDim.x * n_features floats fit (dynamic shared memory of that size).
// kCategorical: the model has categorical splits. Such a node's feature word has
// kCategoricalBit set and its threshold slot holds the offset in category_sets of its set
// ([n_words, words...]): a present value goes right iff its category is in the set, so the
// node still costs one 16-byte load. Without the flag category_sets is never read and the
// walk is the numeric one.
// Launch: 1-D, one thread per row (blocks past the last row return).
template <bool kShared, bool kCategorical>
__global__ void predict_margin(const float* __restrict__ X, long long n_rows, int n_features,
                               const int4* __restrict__ nodes, const int32_t* __restrict__ offsets, int n_trees,
                               float missing, const uint32_t* __restrict__ category_sets, float* __restrict__ out) {
  // A categorical walk masks the flag off the feature; a numeric one only default_left.
  constexpr int kFeatureMask = kCategorical ? kCategoricalBit - 1 : 0x7fffffff;
  extern __shared__ float block_rows[];
  const long long first_row = (long long)blockIdx.x * blockDim.x;
  const long long row = first_row + threadIdx.x;
  const float* x;
  if constexpr (kShared) {
    const long long n_block = min((long long)blockDim.x, n_rows - first_row) * n_features;
    const float* src = X + first_row * n_features;
    for (long long i = threadIdx.x; i < n_block; i += blockDim.x) block_rows[i] = src[i];
    __syncthreads();
    x = block_rows + (long long)threadIdx.x * n_features;
  } else {
    x = X + row * (long long)n_features;
  }
  if (row >= n_rows) return;
  float acc = out[row];
  for (int t0 = 0; t0 < n_trees; t0 += kTreesAtOnce) {
    int4 node[kTreesAtOnce];
    const int4* tree[kTreesAtOnce];
#pragma unroll
    for (int k = 0; k < kTreesAtOnce; ++k) {
      tree[k] = nodes + offsets[min(t0 + k, n_trees - 1)];
      node[k] = t0 + k < n_trees ? __ldg(tree[k]) : make_int4(-1, -1, 0, 0);
    }
    bool walking = true;
    while (walking) {
      walking = false;
#pragma unroll
      for (int k = 0; k < kTreesAtOnce; ++k) {
        if (node[k].x < 0) continue;
        const float v = x[node[k].z & kFeatureMask];
        bool left;
        // With missing == NaN the equality is always false, so one test covers both cases.
        if (isnan(v) || v == missing) {
          left = node[k].z < 0;
        } else if (kCategorical && (node[k].z & kCategoricalBit)) {
          left = !value_in_category_set(category_sets + node[k].w, v);
        } else {
          left = v < __int_as_float(node[k].w);
        }
        node[k] = __ldg(tree[k] + (left ? node[k].x : node[k].y));
        walking |= node[k].x >= 0;
      }
    }
#pragma unroll
    for (int k = 0; k < kTreesAtOnce; ++k) {
      if (t0 + k < n_trees) acc += __int_as_float(node[k].w);
    }
  }
  out[row] = acc;
}

// margin[row * margin_stride] += value[leaf of the row] for the rows of an ELLPACK matrix
// binned with the training cuts: one thread per row walks the tree by bins, as training's
// partition sends rows (bin <= split bin goes left, a missing value takes default_left).
// tree: growth.cu's layout, int32 rows of `cap` words each (TreeField: left < 0 for a leaf,
// value as float bits): a tree grown on the device is read where it was grown, and a host
// tree is uploaded in the same layout (predict/cuda.py).
// kCategorical: the tree has category_rows rows of category-set words from kCategoryRow
// (layouts.py), and categorical[f] != 0 marks the categorical features: a split on one is
// categorical (layouts.py), and its row goes right iff its bin (a categorical feature's bin
// is the row's category) is in the node's set, as partition.cu sends it. Without the flag
// neither is read. Launch: 1-D, any shape (grid-stride over rows).
template <bool kDense, bool kCategorical>
__global__ void add_leaf_values(const EllpackView ell, long long n_rows, const int32_t* __restrict__ tree,
                                long long cap, const uint8_t* __restrict__ categorical, int category_rows,
                                float* __restrict__ margin, long long margin_stride) {
  const uint32_t* __restrict__ words = ell.words;
  const int bits = ell.bits, row_stride = ell.row_stride;
  const uint32_t null_symbol = ell.null_symbol;
  const int32_t* __restrict__ ptrs = ell.ptrs;
  const int32_t* __restrict__ left_of = tree + kLeft * cap;
  const int32_t* __restrict__ right_of = tree + kRight * cap;
  const int32_t* __restrict__ feature_of = tree + kFeature * cap;
  const int32_t* __restrict__ bin_of = tree + kBin * cap;
  const int32_t* __restrict__ default_left_of = tree + kDefaultLeft * cap;
  const int32_t* __restrict__ set_of = tree + kCategoryRow * cap;  // word w of node n: set_of[w * cap + n]
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long row = blockIdx.x * (long long)blockDim.x + threadIdx.x; row < n_rows; row += stride) {
    const unsigned long long begin = (unsigned long long)row * (unsigned long long)row_stride;
    int nid = 0;
    int left_child = left_of[0];
    while (left_child >= 0) {
      const int f = feature_of[nid];
      const int b = ellpack_feature_bin<kDense>(words, bits, begin, row_stride, null_symbol, ptrs, f);
      bool left;
      if (b < 0) {
        left = default_left_of[nid] != 0;
      } else if (kCategorical && categorical[f]) {
        // The node's set is a column of the category rows: bit b % 32 of word b / 32.
        const int w = b >> 5;
        left = w >= category_rows || ((((uint32_t)set_of[w * cap + nid]) >> (b & 31)) & 1u) == 0u;
      } else {
        left = b <= bin_of[nid];
      }
      nid = left ? left_child : right_of[nid];
      left_child = left_of[nid];
    }
    margin[row * margin_stride] += __int_as_float(tree[kValue * cap + nid]);
  }
}

#ifdef DASKGB_NVCC_CHECK  // offline compile check; NVRTC instantiates through name_expressions
template __global__ void predict_margin<true, false>(const float*, long long, int, const int4*, const int32_t*, int,
                                                     float, const uint32_t*, float*);
template __global__ void predict_margin<true, true>(const float*, long long, int, const int4*, const int32_t*, int,
                                                    float, const uint32_t*, float*);
template __global__ void predict_margin<false, false>(const float*, long long, int, const int4*, const int32_t*, int,
                                                      float, const uint32_t*, float*);
template __global__ void predict_margin<false, true>(const float*, long long, int, const int4*, const int32_t*, int,
                                                     float, const uint32_t*, float*);
template __global__ void add_leaf_values<true, false>(const EllpackView, long long, const int32_t*, long long,
                                                      const uint8_t*, int, float*, long long);
template __global__ void add_leaf_values<true, true>(const EllpackView, long long, const int32_t*, long long,
                                                     const uint8_t*, int, float*, long long);
template __global__ void add_leaf_values<false, false>(const EllpackView, long long, const int32_t*, long long,
                                                       const uint8_t*, int, float*, long long);
template __global__ void add_leaf_values<false, true>(const EllpackView, long long, const int32_t*, long long,
                                                      const uint8_t*, int, float*, long long);
#endif
