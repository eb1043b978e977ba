// Gradient histograms of tree nodes in int64 fixed point (cupy_backend.build_histograms).
//
// A block handles one tile (a run of one build node's ridx segment) and one feature
// group (blockIdx.y): contiguous features whose bins fit the block's shared memory.
// Threads take (row, slot) items, so neighbouring threads read neighbouring
// symbols of the same row and spread their adds over different features' bins.
// Integer atomics make every sum exact and independent of the order the adds land
// in (see cupy_backend.prepare_gradients).
#include "common.cuh"

// A 64-bit add to shared memory as two native 32-bit atomics and the carry of the
// low word (XGBOOST_GPU_NOTES §3): a 64-bit shared atomic add compiles to a
// compare-and-swap loop, which serialises under contention. The result is the exact
// 64-bit sum once every add has landed: each add that wraps the low word carries one
// into the high word, whatever order the adds land in.
__device__ __forceinline__ void shared_add64(unsigned* lo, unsigned* hi, long long v) {
  const unsigned x_lo = (unsigned)(unsigned long long)v;
  const unsigned x_hi = (unsigned)((unsigned long long)v >> 32);
  const unsigned old = atomicAdd(lo, x_lo);
  const unsigned h = x_hi + (old > 0xffffffffu - x_lo ? 1u : 0u);
  if (h != 0u) atomicAdd(hi, h);
}

// Items loaded before any of their adds, so that a thread has this many
// independent memory reads in flight.
constexpr int kItemsPerStep = 4;

// hist: (n_build_nodes, total_bins, 2) int64, zeroed by the caller.
// tiles: (n_tiles, 4) int64 rows of (build-node slot, first ridx slot, row count, row offset).
// ridx holds virtual rows (see partition.cu): gradients are indexed by the virtual
// row, the ELLPACK by the virtual row minus the tile's row offset (its tree's first
// virtual row; 0 for a single tree).
// groups: (n_groups, 2) int32 rows of (first feature, one past the last feature).
// kShared: accumulate in a shared-memory copy of the group's bins, flushed with one
// global atomic per non-zero value; otherwise add straight to global memory (a group
// too large for shared memory). Dynamic shared memory: four planes of n_bins 32-bit
// words (gradient low and high words, hessian low and high words), then the group's
// features' first bins (4 bytes per feature). Planes rather than 16-byte bins: the
// low words of neighbouring bins then sit in neighbouring banks, so a warp's adds to
// 32 different bins mostly go to different banks instead of a quarter of them.
// Launch: grid (n_tiles, n_groups), any block size.
template <bool kDense, bool kShared>
__global__ void build_histogram(const uint32_t* __restrict__ words, int bits, int row_stride,
                                uint32_t null_symbol, const int32_t* __restrict__ ptrs,
                                const uint32_t* __restrict__ ridx, const longlong2* __restrict__ gpair,
                                const long long* __restrict__ tiles, const int32_t* __restrict__ groups,
                                int total_bins, long long* __restrict__ hist) {
  extern __shared__ unsigned smem[];
  const int f0 = groups[2 * blockIdx.y];
  const int f1 = groups[2 * blockIdx.y + 1];
  const int bin0 = ptrs[f0];
  const int n_bins = ptrs[f1] - bin0;
  const long long slot = tiles[4 * blockIdx.x];
  const long long begin = tiles[4 * blockIdx.x + 1];
  const unsigned count = (unsigned)tiles[4 * blockIdx.x + 2];
  const unsigned long long row_offset = (unsigned long long)tiles[4 * blockIdx.x + 3];
  long long* node_hist = hist + (slot * total_bins + bin0) * 2;
  // Dense rows: the group's slots f0..f1-1. Sparse rows: every slot, keeping the
  // entries whose global bin falls in the group (the null symbol, total_bins,
  // falls in none).
  const unsigned width = kDense ? (unsigned)(f1 - f0) : (unsigned)row_stride;
  const unsigned first_slot = kDense ? (unsigned)f0 : 0u;
  const int planes = kShared ? 4 * n_bins : 0;
  unsigned* g_lo = smem;
  unsigned* g_hi = smem + n_bins;
  unsigned* h_lo = smem + 2 * n_bins;
  unsigned* h_hi = smem + 3 * n_bins;
  // Dense: each slot's first bin within the group.
  int* local_ptrs = reinterpret_cast<int*>(smem + planes);

  for (int i = threadIdx.x; i < planes; i += blockDim.x) smem[i] = 0u;
  if constexpr (kDense) {
    for (int i = threadIdx.x; i < (int)width; i += blockDim.x) local_ptrs[i] = ptrs[f0 + i] - bin0;
  }
  __syncthreads();

  // Item i is (row i / width, slot i % width); a thread steps through its items by
  // blockDim.x at a time, tracking (row, slot) without dividing per item.
  const unsigned n_items = count * width;  // the host keeps tiles below 2**31 items
  const unsigned step_r = blockDim.x / width, step_j = blockDim.x % width;
  unsigned r = threadIdx.x / width, j = threadIdx.x % width;
  for (unsigned item = threadIdx.x; item < n_items; item += kItemsPerStep * blockDim.x) {
    int bin[kItemsPerStep];
    longlong2 gh[kItemsPerStep];
#pragma unroll
    for (int u = 0; u < kItemsPerStep; ++u) {
      bin[u] = -1;
      if (item + u * blockDim.x < n_items) {
        const unsigned long long row = ridx[begin + r];
        const uint32_t s = ellpack_symbol(words, bits, (row - row_offset) * (unsigned long long)row_stride +
                                                           (j + first_slot));
        if constexpr (kDense) {
          if (s != null_symbol) bin[u] = local_ptrs[j] + (int)s;
        } else {
          if (s >= (uint32_t)bin0 && s < (uint32_t)(bin0 + n_bins)) bin[u] = (int)s - bin0;
        }
        if (bin[u] >= 0) gh[u] = gpair[row];
      }
      r += step_r;
      j += step_j;
      if (j >= width) {
        j -= width;
        ++r;
      }
    }
#pragma unroll
    for (int u = 0; u < kItemsPerStep; ++u) {
      const int b = bin[u];
      if (b < 0) continue;
      if constexpr (kShared) {
        if (gh[u].x != 0) shared_add64(g_lo + b, g_hi + b, gh[u].x);
        if (gh[u].y != 0) shared_add64(h_lo + b, h_hi + b, gh[u].y);
      } else {
        // Two's complement: an unsigned add of a negative value is the signed add.
        if (gh[u].x != 0) atomicAdd((unsigned long long*)&node_hist[2 * b], (unsigned long long)gh[u].x);
        if (gh[u].y != 0) atomicAdd((unsigned long long*)&node_hist[2 * b + 1], (unsigned long long)gh[u].y);
      }
    }
  }

  if constexpr (kShared) {
    __syncthreads();
    for (int i = threadIdx.x; i < 2 * n_bins; i += blockDim.x) {
      const int b = i >> 1;
      const unsigned lo = (i & 1) ? h_lo[b] : g_lo[b];
      const unsigned hi = (i & 1) ? h_hi[b] : g_hi[b];
      const unsigned long long v = ((unsigned long long)hi << 32) | lo;
      if (v != 0ull) atomicAdd((unsigned long long*)&node_hist[i], v);
    }
  }
}

#ifdef DASKGB_NVCC_CHECK  // offline compile check; NVRTC instantiates through name_expressions
#define DASKGB_INSTANTIATE(D, S)                                                                        \
  template __global__ void build_histogram<D, S>(const uint32_t*, int, int, uint32_t, const int32_t*, \
                                                 const uint32_t*, const longlong2*, const long long*,  \
                                                 const int32_t*, int, long long*);
DASKGB_INSTANTIATE(true, true)
DASKGB_INSTANTIATE(true, false)
DASKGB_INSTANTIATE(false, true)
DASKGB_INSTANTIATE(false, false)
#endif
