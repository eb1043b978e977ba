// Gradient histograms of tree nodes in int64 fixed point (histogram/cuda.py build_histograms).
//
// A block handles one tile (a run of one build node's ridx segment) and one feature
// group (blockIdx.y): contiguous features whose bins fit the block's shared memory.
// threads_per_row threads share a row: each loads the row's id and gradient pair
// once and adds every threads_per_row-th of the row's slots in the group, starting
// at a slot that differs from row to row, so that a warp's adds spread over
// different features' bins. Integer atomics make every sum exact and independent of
// the order the adds land in (see histogram/quantiser.py).
#include "common.cuh"

// Shared-memory bins sum int64 values exactly with 32-bit shared atomics, as two planes
// per value: the low word, whose atomic returns the old value so that a wrap carries
// one into the high word, exact in any order -- XGBoost's way (XGBOOST_GPU_NOTES §3)
// rather than 64-bit shared atomics. (Measured, benchmarks/hist_variants.py: three
// fire-and-forget planes per value -- the high word and the low word's 16-bit halves --
// were slower.)
constexpr int kPlanes = 2;
__device__ __forceinline__ void shared_add(unsigned* p, int n_bins, int b, long long v) {
  const unsigned x_lo = (unsigned)(unsigned long long)v;
  const unsigned x_hi = (unsigned)((unsigned long long)v >> 32);
  const unsigned old = atomicAdd(p + b, x_lo);
  const unsigned h = x_hi + (old > 0xffffffffu - x_lo ? 1u : 0u);
  if (h != 0u) atomicAdd(p + n_bins + b, h);
}
__device__ __forceinline__ unsigned long long shared_total(const unsigned* p, int n_bins, int b) {
  return ((unsigned long long)p[n_bins + b] << 32) | (unsigned long long)p[b];
}

// A row's fixed-point pair added to bin b of its node: into the block's shared planes, or
// straight into the node's global histogram. Two's complement: an unsigned add of a
// negative value is the signed add.
template <bool kShared>
__device__ __forceinline__ void add_pair(unsigned* g_planes, unsigned* h_planes, int n_bins, long long* node_hist,
                                         int b, longlong2 gh) {
  if constexpr (kShared) {
    if (gh.x != 0) shared_add(g_planes, n_bins, b, gh.x);
    if (gh.y != 0) shared_add(h_planes, n_bins, b, gh.y);
  } else {
    if (gh.x != 0) atomicAdd((unsigned long long*)&node_hist[2 * b], (unsigned long long)gh.x);
    if (gh.y != 0) atomicAdd((unsigned long long*)&node_hist[2 * b + 1], (unsigned long long)gh.y);
  }
}

// ell: the matrix; a: the launch's inputs and output (HistogramArgs):
// hist: (n_build_nodes, total_bins, 2) int64, zeroed by the caller.
// tiles: int64, a header row (n_tiles, 0, 0, 0), then n_tiles rows of (build-node slot, node
// id, tile index, row offset) (TileColumn): the block takes rows [tile index * tile_rows, + tile_rows)
// of the node's segment, read from segs[node] = (start, count) on the device, so a launch
// may be sized before the host knows the node's count (from its parent's, an upper bound:
// tiles past the end return at once) or even the number of tiles (written on the device
// by level.cu: blocks past n_tiles return at once).
// gpair: (rows, 2) float32 gradient pairs, turned into int64 fixed point on load (times
// inv_scale[0] / inv_scale[1], read from the device: no host wait for the scale), so the
// fixed-point copy never takes device memory.
// ridx holds virtual rows (see partition.cu): gradients are indexed by the virtual
// row, the ELLPACK by the virtual row minus the tile's row offset (its tree's first
// virtual row; 0 for a single tree).
// groups: (n_groups, 2) int32 rows of (first feature, one past the last feature).
// kShared: accumulate in a shared-memory copy of the group's bins, flushed with one
// global atomic per non-zero value; otherwise add straight to global memory (a group
// too large for shared memory). Dynamic shared memory: 2 * kPlanes planes of n_bins
// 32-bit words (the gradient's kPlanes, then the hessian's), then the group's
// features' first bins (4 bytes per feature). Planes rather than whole bins: a plane's
// neighbouring bins sit in neighbouring banks, so a warp's adds to 32 different bins
// mostly go to different banks.
// threads_per_row: a power of two dividing the block size.
// window (dense only): each thread of a row takes a contiguous run of the row's slots in
// the group (at most kWindowSlots of them, within three words from the run's first, which
// the host checks) and reads its words once, extracting the symbols with funnel shifts,
// instead of a load per slot. ell.n_words: the words' length (the third word may lie past it).
// Otherwise (window == 0, or a sparse row) a thread takes every threads_per_row-th slot.
// Launch: grid (at least n_tiles, n_groups), any block size.
template <bool kDense, bool kShared>
__global__ void build_histogram(const EllpackView ell, const HistogramArgs a) {
  const uint32_t* __restrict__ words = ell.words;
  const int bits = ell.bits, row_stride = ell.row_stride;
  const uint32_t null_symbol = ell.null_symbol;
  const int32_t* __restrict__ ptrs = ell.ptrs;
  const unsigned long long n_words = ell.n_words;
  const uint32_t* __restrict__ ridx = a.ridx;
  const float2* __restrict__ gpair = a.gpair;
  const double* __restrict__ inv_scale = a.inv_scale;
  const long long* __restrict__ tiles = a.tiles;
  const long long* __restrict__ segs = a.segs;
  const long long tile_rows = a.tile_rows;
  const int32_t* __restrict__ groups = a.groups;
  const int total_bins = a.total_bins, threads_per_row = a.threads_per_row, window = a.window;
  long long* __restrict__ hist = a.hist;
  extern __shared__ unsigned smem[];
  const double inv_scale_g = inv_scale[0], inv_scale_h = inv_scale[1];
  const int f0 = groups[2 * blockIdx.y];
  const int f1 = groups[2 * blockIdx.y + 1];
  const int bin0 = ptrs[f0];
  const int n_bins = ptrs[f1] - bin0;
  if ((long long)blockIdx.x >= tiles[0]) return;  // the whole block: before any barrier
  const long long* tile = tiles + kTileColumns * (blockIdx.x + 1);
  const long long slot = tile[kTileSlot];
  const long long node = tile[kTileNode];
  const long long skip = tile[kTileIndex] * tile_rows;
  const long long seg_count = segs[2 * node + 1];
  if (skip >= seg_count) return;
  const long long begin = segs[2 * node] + skip;
  const unsigned count = (unsigned)min(tile_rows, seg_count - skip);
  const unsigned long long row_offset = (unsigned long long)tile[kTileRowOffset];
  long long* node_hist = hist + (slot * total_bins + bin0) * 2;
  // Dense rows: the group's slots f0..f1-1. Sparse rows: up to every slot.
  const unsigned width = kDense ? (unsigned)(f1 - f0) : (unsigned)row_stride;
  const unsigned first_slot = kDense ? (unsigned)f0 : 0u;
  const int planes = kShared ? 2 * kPlanes * n_bins : 0;
  unsigned* g_planes = smem;
  unsigned* h_planes = smem + kPlanes * n_bins;
  // Dense: each slot's first bin within the group.
  int* local_ptrs = reinterpret_cast<int*>(smem + planes);

  for (int i = threadIdx.x; i < planes; i += blockDim.x) smem[i] = 0u;
  if constexpr (kDense) {
    for (int i = threadIdx.x; i < (int)width; i += blockDim.x) local_ptrs[i] = ptrs[f0 + i] - bin0;
  }
  __syncthreads();

  const unsigned sub = threadIdx.x & (unsigned)(threads_per_row - 1);
  const unsigned rows_per_pass = blockDim.x / (unsigned)threads_per_row;
  for (unsigned i = threadIdx.x / (unsigned)threads_per_row; i < count; i += rows_per_pass) {
    const unsigned long long row = ridx[begin + i];
    // The row's gradient pair in fixed point, as histogram/cuda.py's _to_fixed makes it: the scale
    // is a power of two, so the product is exact and the cast truncates toward zero.
    const float2 gf = gpair[row];
    const longlong2 gh = make_longlong2((long long)((double)gf.x * inv_scale_g),
                                       (long long)((double)gf.y * inv_scale_h));
    if (gh.x == 0 && gh.y == 0) continue;
    unsigned long long first = (row - row_offset) * (unsigned long long)row_stride + first_slot;
    // The row's slots in the group: all of the group's for a dense row; for a sparse
    // row, whose global bins ascend, the run of entries within the group's bins.
    unsigned n = width;
    if constexpr (!kDense) {
      const int lo = ellpack_lower_bound(words, bits, first, row_stride, (uint32_t)bin0);
      n = (unsigned)(ellpack_lower_bound(words, bits, first, row_stride, (uint32_t)(bin0 + n_bins)) - lo);
      first += (unsigned long long)lo;
    }
    if (kDense && window) {
      // This thread's run of slots: [j0, j0 + run).
      const unsigned per = (n + (unsigned)threads_per_row - 1u) / (unsigned)threads_per_row;
      const unsigned j0 = sub * per;
      const unsigned run = j0 < n ? min(per, n - j0) : 0u;
      if (run == 0u) continue;
      const unsigned long long bit0 = (first + j0) * (unsigned long long)bits;
      const unsigned long long w0 = bit0 >> 5;
      const unsigned off = (unsigned)(bit0 & 31ull);
      const uint32_t a = words[w0];
      const uint32_t b = words[w0 + 1];  // the stream ends with a padding word
      const uint32_t c = w0 + 2 < n_words ? words[w0 + 2] : 0u;
      const uint32_t mask = (uint32_t)((1ull << bits) - 1ull);
      // The run is visited from a start that differs from row to row, so that the rows of a
      // warp add to different features at each step: on a feature with few distinct values
      // they would otherwise all add to the same bin at once, and same-address atomics serialise.
      unsigned r = i % run;
#pragma unroll
      for (unsigned q = 0; q < kWindowSlots; ++q) {
        if (q >= run) break;
        const unsigned slot = r;
        r = r + 1u == run ? 0u : r + 1u;
        const unsigned sb = off + slot * (unsigned)bits;
        const uint32_t x = sb < 32u ? __funnelshift_r(a, b, sb) : (sb < 64u ? __funnelshift_r(b, c, sb) : c >> (sb & 31u));
        const uint32_t sym = x & mask;
        if (sym == null_symbol) continue;
        add_pair<kShared>(g_planes, h_planes, n_bins, node_hist, local_ptrs[j0 + slot] + (int)sym, gh);
      }
      continue;
    }
    // This thread's slots: sub, sub + threads_per_row, ..., rotated by a start that
    // differs from row to row.
    unsigned j = sub + (n ? i % n : 0u);
    for (unsigned m = sub; m < n; m += threads_per_row) {
      while (j >= n) j -= n;
      const uint32_t s = ellpack_symbol(words, bits, first + j);
      int b;
      if constexpr (kDense) {
        b = s != null_symbol ? local_ptrs[j] + (int)s : -1;
      } else {
        b = (int)s - bin0;
      }
      j += threads_per_row;
      if (b < 0) continue;
      add_pair<kShared>(g_planes, h_planes, n_bins, node_hist, b, gh);
    }
  }

  if constexpr (kShared) {
    __syncthreads();
    for (int i = threadIdx.x; i < 2 * n_bins; i += blockDim.x) {
      const unsigned long long v = shared_total((i & 1) ? h_planes : g_planes, n_bins, i >> 1);
      if (v != 0ull) atomicAdd((unsigned long long*)&node_hist[i], v);
    }
  }
}

#ifdef DASKGB_NVCC_CHECK  // offline compile check; NVRTC instantiates through name_expressions
#define DASKGB_INSTANTIATE(D, S) template __global__ void build_histogram<D, S>(const EllpackView, const HistogramArgs);
DASKGB_INSTANTIATE(true, true)
DASKGB_INSTANTIATE(true, false)
DASKGB_INSTANTIATE(false, true)
DASKGB_INSTANTIATE(false, false)
#endif
