// Gradient histograms of tree nodes in int64 fixed point (cupy_backend.build_histograms).
//
// A block handles one tile (a run of one build node's ridx segment) and one feature
// group (blockIdx.y): contiguous features whose bins fit the block's shared memory.
// Threads take (row, slot) items, so neighbouring threads read neighbouring
// symbols of the same row. Integer atomics make every sum exact and independent
// of the order the adds land in (see cupy_backend.prepare_gradients).
#include "common.cuh"

// hist: (n_build_nodes, total_bins, 2) int64, zeroed by the caller.
// tiles: (n_tiles, 4) int64 rows of (build-node slot, first ridx slot, row count, row offset).
// ridx holds virtual rows (see partition.cu): gradients are indexed by the virtual
// row, the ELLPACK by the virtual row minus the tile's row offset (its tree's first
// virtual row; 0 for a single tree).
// groups: (n_groups, 2) int32 rows of (first feature, one past the last feature).
// kShared: accumulate in a shared-memory copy of the group's bins (dynamic shared
// memory of 16 bytes per bin), flushed with one global atomic per non-zero value;
// otherwise add straight to global memory (a group too large for shared memory).
// Launch: grid (n_tiles, n_groups), any block size.
template <bool kDense, bool kShared>
__global__ void build_histogram(const uint32_t* __restrict__ words, int bits, int row_stride,
                                uint32_t null_symbol, const int32_t* __restrict__ ptrs,
                                const uint32_t* __restrict__ ridx, const long long* __restrict__ gpair,
                                const long long* __restrict__ tiles, const int32_t* __restrict__ groups,
                                int total_bins, long long* __restrict__ hist) {
  extern __shared__ long long smem[];
  const int f0 = groups[2 * blockIdx.y];
  const int f1 = groups[2 * blockIdx.y + 1];
  const int bin0 = ptrs[f0];
  const int n_bins = ptrs[f1] - bin0;
  const long long slot = tiles[4 * blockIdx.x];
  const long long begin = tiles[4 * blockIdx.x + 1];
  const unsigned count = (unsigned)tiles[4 * blockIdx.x + 2];
  const unsigned long long row_offset = (unsigned long long)tiles[4 * blockIdx.x + 3];
  long long* node_hist = hist + (slot * total_bins + bin0) * 2;
  long long* acc = kShared ? smem : node_hist;

  if constexpr (kShared) {
    for (int i = threadIdx.x; i < 2 * n_bins; i += blockDim.x) smem[i] = 0;
    __syncthreads();
  }

  // Dense rows: the group's slots f0..f1-1. Sparse rows: every slot, keeping the
  // entries whose global bin falls in the group (the null symbol, total_bins,
  // falls in none).
  const unsigned width = kDense ? (unsigned)(f1 - f0) : (unsigned)row_stride;
  const unsigned first_slot = kDense ? (unsigned)f0 : 0u;
  const unsigned n_items = count * width;  // the host keeps tiles below 2**31 items
  for (unsigned item = threadIdx.x; item < n_items; item += blockDim.x) {
    const unsigned r = item / width;
    const unsigned j = item - r * width + first_slot;
    const unsigned long long row = ridx[begin + r];
    const uint32_t s = ellpack_symbol(words, bits, (row - row_offset) * (unsigned long long)row_stride + j);
    int bin;
    if constexpr (kDense) {
      if (s == null_symbol) continue;
      bin = ptrs[j] + (int)s - bin0;
    } else {
      if (s < (uint32_t)bin0 || s >= (uint32_t)(bin0 + n_bins)) continue;
      bin = (int)s - bin0;
    }
    const long long g = gpair[2 * row];
    const long long h = gpair[2 * row + 1];
    // Two's complement: an unsigned add of a negative value is the signed add.
    if (g != 0) atomicAdd((unsigned long long*)&acc[2 * bin], (unsigned long long)g);
    if (h != 0) atomicAdd((unsigned long long*)&acc[2 * bin + 1], (unsigned long long)h);
  }

  if constexpr (kShared) {
    __syncthreads();
    for (int i = threadIdx.x; i < 2 * n_bins; i += blockDim.x) {
      const long long v = smem[i];
      if (v != 0) atomicAdd((unsigned long long*)&node_hist[i], (unsigned long long)v);
    }
  }
}

#ifdef DASKGB_NVCC_CHECK  // offline compile check; NVRTC instantiates through name_expressions
template __global__ void build_histogram<true, true>(const uint32_t*, int, int, uint32_t, const int32_t*,
                                                     const uint32_t*, const long long*, const long long*,
                                                     const int32_t*, int, long long*);
template __global__ void build_histogram<true, false>(const uint32_t*, int, int, uint32_t, const int32_t*,
                                                      const uint32_t*, const long long*, const long long*,
                                                      const int32_t*, int, long long*);
template __global__ void build_histogram<false, true>(const uint32_t*, int, int, uint32_t, const int32_t*,
                                                      const uint32_t*, const long long*, const long long*,
                                                      const int32_t*, int, long long*);
template __global__ void build_histogram<false, false>(const uint32_t*, int, int, uint32_t, const int32_t*,
                                                       const uint32_t*, const long long*, const long long*,
                                                       const int32_t*, int, long long*);
#endif
