// Rows per node: stable partition of each split node's ridx segment into its children
// (cupy_backend.apply_splits; numpy_backend.apply_splits is the reference).
//
// The split nodes' segments are visited as one compact range t = 0..n_split_rows-1:
// split i owns t in [cum[i], cum[i+1]) and ridx slots start[i] + (t - cum[i]).
// partition_flags writes each row's go-left flag; the host takes an exclusive scan
// of the flags (cupy.cumsum); partition_scatter then puts the left rows first and
// the right rows after them, each in their old order.
//
// `info` holds the level's splits as int64, k entries per field after cum:
//   cum[k+1] | start[k] | feature[k] | bin[k] | default_left[k] | left_id[k] | right_id[k] | row_offset[k]
//
// ridx holds "virtual" rows: a forest of K trees grown together (multiclass) numbers
// the rows of tree c as c * n_rows + row, so row_offset[i] (the split node's tree
// times n_rows) turns a virtual row back into its ELLPACK row. A single tree has
// offset 0. positions is indexed by virtual row.
#include "common.cuh"

struct LevelSplits {
  const long long* cum;
  const long long* start;
  const long long* feature;
  const long long* bin;
  const long long* default_left;
  const long long* left_id;
  const long long* right_id;
  const long long* row_offset;
  int k;

  __device__ LevelSplits(const long long* info, int k_)
      : cum(info),
        start(info + k_ + 1),
        feature(info + 2 * k_ + 1),
        bin(info + 3 * k_ + 1),
        default_left(info + 4 * k_ + 1),
        left_id(info + 5 * k_ + 1),
        right_id(info + 6 * k_ + 1),
        row_offset(info + 7 * k_ + 1),
        k(k_) {}

  // The split owning compact index t: the last i with cum[i] <= t (splits with no
  // rows have cum[i] == cum[i+1] and are skipped by taking the last).
  __device__ __forceinline__ int owner(long long t) const {
    int lo = 0, hi = k + 1;  // upper bound of t in cum[0..k]
    while (lo < hi) {
      int mid = (lo + hi) >> 1;
      if (cum[mid] <= t) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo - 1;
  }
};

// flags[t + 1] = 1 when the row at compact index t goes left; flags[0] = 0, so that
// an inclusive scan of flags is the exclusive scan of the go-left flags.
// rows[t] keeps the row id, so the scatter may overwrite ridx in place.
// Launch: 1-D, any shape (grid-stride over n_split_rows).
template <bool kDense>
__global__ void partition_flags(const uint32_t* __restrict__ words, int bits, int row_stride,
                                uint32_t null_symbol, const int32_t* __restrict__ ptrs,
                                const uint32_t* __restrict__ ridx, const long long* __restrict__ info, int k,
                                long long n_split_rows, uint32_t* __restrict__ rows,
                                int32_t* __restrict__ flags) {
  const LevelSplits s(info, k);
  const long long stride = (long long)gridDim.x * blockDim.x;
  long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (t == 0) flags[0] = 0;
  for (; t < n_split_rows; t += stride) {
    int i = s.owner(t);
    uint32_t row = ridx[s.start[i] + (t - s.cum[i])];
    rows[t] = row;
    const unsigned long long data_row = (unsigned long long)row - (unsigned long long)s.row_offset[i];
    int b = ellpack_feature_bin<kDense>(words, bits, data_row * (unsigned long long)row_stride,
                                        row_stride, null_symbol, ptrs, (int)s.feature[i]);
    bool left = b < 0 ? s.default_left[i] != 0 : (long long)b <= s.bin[i];
    flags[t + 1] = left ? 1 : 0;
  }
}

// scan[t] = number of left rows at compact indices < t (scan has n_split_rows + 1 entries).
// Launch: 1-D, any shape (grid-stride over n_split_rows).
__global__ void partition_scatter(const uint32_t* __restrict__ rows, const int32_t* __restrict__ scan,
                                  const long long* __restrict__ info, int k, long long n_split_rows,
                                  uint32_t* __restrict__ ridx, int32_t* __restrict__ positions) {
  const LevelSplits s(info, k);
  const long long stride = (long long)gridDim.x * blockDim.x;
  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < n_split_rows; t += stride) {
    int i = s.owner(t);
    long long begin = s.cum[i];
    long long base = scan[begin];
    long long left_before = scan[t] - base;
    long long n_left = scan[s.cum[i + 1]] - base;
    bool left = scan[t + 1] != scan[t];
    long long dest = left ? left_before : n_left + (t - begin) - left_before;
    uint32_t row = rows[t];
    ridx[s.start[i] + dest] = row;
    positions[row] = (int32_t)(left ? s.left_id[i] : s.right_id[i]);
  }
}

#ifdef DASKGB_NVCC_CHECK  // offline compile check; NVRTC instantiates through name_expressions
template __global__ void partition_flags<true>(const uint32_t*, int, int, uint32_t, const int32_t*,
                                               const uint32_t*, const long long*, int, long long, uint32_t*,
                                               int32_t*);
template __global__ void partition_flags<false>(const uint32_t*, int, int, uint32_t, const int32_t*,
                                                const uint32_t*, const long long*, int, long long, uint32_t*,
                                                int32_t*);
#endif
