// The weighted quantile sketch's segmented binary search (sketch/cuda.py; sketch/reference.py is the reference):
// for each query q, the index of the first entry of a[lo[q]:hi[q]] (a sorted run) that is
// greater than v[q] (right) or not less than it (left), as an index into a; hi[q] where
// none is. One thread a query: the array-operation reference takes one pass per bit of the
// widest run (~130 small launches for runs of 4M entries), this one launch.
// Launch: 1-D, at least n threads.

template <bool kRight>
__device__ void search(const double* __restrict__ a, const long long* __restrict__ lo,
                       const long long* __restrict__ hi, const double* __restrict__ v, long long n,
                       long long* __restrict__ out) {
  const long long q = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (q >= n) return;
  long long l = lo[q], h = hi[q];
  const double x = v[q];
  while (l < h) {
    const long long mid = l + ((h - l) >> 1);
    const double am = a[mid];
    if (kRight ? (am <= x) : (am < x)) {
      l = mid + 1;
    } else {
      h = mid;
    }
  }
  out[q] = l;
}

__global__ void segmented_search_right(const double* a, const long long* lo, const long long* hi,
                                       const double* v, long long n, long long* out) {
  search<true>(a, lo, hi, v, n, out);
}

__global__ void segmented_search_left(const double* a, const long long* lo, const long long* hi,
                                      const double* v, long long n, long long* out) {
  search<false>(a, lo, hi, v, n, out);
}

// ---------------------------------------------------------------------------------------------
// A dense block's summaries (sketch/cuda.py summarize_dense; its oracle is sketch/reference.py's,
// the array steps of sketch._summarize_entries): each column's present values as sort keys, one
// sort, then each column's exact summary -- or that summary pruned to the budget -- read off the
// sorted keys' runs of equal values without building the exact summary's float arrays.
//
// A key orders (column, value) as one unsigned integer: the column in the high 32 bits (a 64-bit
// key; a one-column block sorts 32-bit keys, twice as fast), the value's bits made to sort as the
// number in the low 32. Ranks are unweighted: an entry's rmin is the count of the column's keys
// below its run, its wmin the run's length, its rmax their sum; every one an integer a double
// holds exactly, so the prune's arithmetic below equals sketch.prune's bit for bit.

// The order key of a NaN-free float: -0.0 and 0.0 one key (sketch._value_key).
__device__ __forceinline__ unsigned int sketch_value_key(float v) {
  v = v + 0.0f;
  const unsigned int bits = __float_as_uint(v);
  return bits >= 0x80000000u ? ~bits : (bits | 0x80000000u);
}

__device__ __forceinline__ float sketch_key_value(unsigned int key) {
  return __uint_as_float(key >= 0x80000000u ? (key ^ 0x80000000u) : ~key);
}

template <typename Key>
__device__ __forceinline__ Key sketch_key(long long column, unsigned int value_key);

template <>
__device__ __forceinline__ unsigned int sketch_key<unsigned int>(long long, unsigned int value_key) {
  return value_key;
}

template <>
__device__ __forceinline__ unsigned long long sketch_key<unsigned long long>(long long column,
                                                                              unsigned int value_key) {
  return ((unsigned long long)column << 32) | value_key;
}

// The keys of a (rows, k) block's present entries (neither NaN nor `missing`), in no order.
// A block takes tiles of kItems entries a thread: it counts its present entries, claims their
// slots with one atomic a tile (one a warp contends on a single counter ~8x as often: 0.6 ms
// a Higgs column against the sort's 0.4 ms), and each thread writes its keys side by side.
// found[0] counts the keys written; found[1] is set where a present entry is infinite (an
// error the host names). x[r, c] lies at x + r * row_stride + c * col_stride.
// Launch: 1-D, blocks of a multiple of 32 threads, at most 1024.
constexpr int kSketchItems = 8;

template <typename Key>
__device__ void sketch_keys_impl(const float* __restrict__ x, long long rows, int k, long long row_stride,
                                 long long col_stride, float missing, int missing_is_nan,
                                 Key* __restrict__ keys, unsigned long long* __restrict__ found) {
  __shared__ unsigned int warp_before[32];
  __shared__ unsigned long long tile_first;
  const long long n = rows * k;
  const long long tile = (long long)blockDim.x * kSketchItems;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  for (long long t0 = blockIdx.x * tile; t0 < n; t0 += (long long)gridDim.x * tile) {
    Key mine[kSketchItems];
    bool present[kSketchItems];
    int count = 0;
#pragma unroll
    for (int i = 0; i < kSketchItems; ++i) {
      const long long e = t0 + (long long)i * blockDim.x + threadIdx.x;
      present[i] = false;
      mine[i] = 0;
      if (e < n) {
        const long long r = e / k, c = e - r * k;
        const float v = x[r * row_stride + c * col_stride];
        present[i] = !isnan(v) && (missing_is_nan || v != missing);
        if (present[i]) {
          if (isinf(v)) found[1] = 1ull;
          mine[i] = sketch_key<Key>(c, sketch_value_key(v));
          ++count;
        }
      }
    }
    // The block's exclusive scan of the counts: within each warp, then over the warps.
    int inclusive = count;
#pragma unroll
    for (int d = 1; d < 32; d <<= 1) {
      const int y = __shfl_up_sync(0xffffffffu, inclusive, d);
      if (lane >= d) inclusive += y;
    }
    if (lane == 31) warp_before[warp] = (unsigned int)inclusive;
    __syncthreads();
    if (warp == 0) {
      const unsigned int own = lane < n_warps ? warp_before[lane] : 0u;
      unsigned int upto = own;
#pragma unroll
      for (int d = 1; d < 32; d <<= 1) {
        const unsigned int y = __shfl_up_sync(0xffffffffu, upto, d);
        if (lane >= d) upto += y;
      }
      if (lane < n_warps) warp_before[lane] = upto - own;
      if (lane == 31) tile_first = upto ? atomicAdd(found, (unsigned long long)upto) : 0ull;
    }
    __syncthreads();
    unsigned long long at = tile_first + warp_before[warp] + (unsigned int)(inclusive - count);
#pragma unroll
    for (int i = 0; i < kSketchItems; ++i) {
      if (present[i]) keys[at++] = mine[i];
    }
    __syncthreads();  // the next tile rewrites warp_before and tile_first
  }
}

// ---------------------------------------------------------------------------------------------
// Scans a block or a warp shares. Every thread of the block (a multiple of 32 threads, at most
// 1024) calls them, with loop bounds the same for all.

struct SketchSum {
  template <typename T>
  __device__ __forceinline__ T operator()(T earlier, T later) const { return earlier + later; }
};

// A running maximum that keeps a value not below the maximum before it, as sketch._segmented_cummax's
// np.maximum(x[i], x[i - d]) does: so a sequence already ascending comes back unchanged, bit for bit.
struct SketchMax {
  __device__ __forceinline__ double operator()(double earlier, double later) const {
    return later >= earlier ? later : earlier;
  }
};

template <typename T, typename Op>
__device__ __forceinline__ T sketch_warp_inclusive_scan(T v, Op op) {
  const int lane = threadIdx.x & 31;
#pragma unroll
  for (int d = 1; d < 32; d <<= 1) {
    const T y = __shfl_up_sync(0xffffffffu, v, d);
    if (lane >= d) v = op(y, v);
  }
  return v;
}

// The block's inclusive scan of one value a thread; *total gets the whole block's.
template <typename T, typename Op>
__device__ T sketch_block_inclusive_scan(T v, Op op, T* total) {
  __shared__ T warp_upto[32];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = blockDim.x >> 5;
  v = sketch_warp_inclusive_scan(v, op);
  if (lane == 31) warp_upto[warp] = v;
  __syncthreads();
  if (warp == 0) {
    // Lanes past the last warp scan a copy of warp 0's value: they only feed lanes above them.
    const T w = sketch_warp_inclusive_scan(warp_upto[lane < n_warps ? lane : 0], op);
    if (lane < n_warps) warp_upto[lane] = w;
  }
  __syncthreads();
  if (warp > 0) v = op(warp_upto[warp - 1], v);
  *total = warp_upto[n_warps - 1];
  __syncthreads();  // the next call rewrites warp_upto
  return v;
}

// offsets[i] = counts[0] + ... + counts[i - 1] for i <= n (offsets[n]: the sum of all). counts and
// offsets may be one array. The counts are a few thousand (a tile's runs): one block walks them.
// Launch: one block.
extern "C" __global__ void sketch_exclusive_scan(const long long* counts, long long n, long long* offsets) {
  long long carry = 0;
  for (long long i0 = 0; i0 < n; i0 += blockDim.x) {
    const long long i = i0 + threadIdx.x;
    const long long v = i < n ? counts[i] : 0;
    long long total;
    const long long upto = sketch_block_inclusive_scan(v, SketchSum(), &total);
    if (i < n) offsets[i] = carry + upto - v;
    carry += total;
  }
  if (threadIdx.x == 0) offsets[n] = carry;
}

// ---------------------------------------------------------------------------------------------
// The sorted keys' runs of equal keys (one value of one column), found without a head array:
// sketch_run_tiles counts the runs starting in each tile of kSketchItems keys a thread,
// sketch_exclusive_scan turns the counts into each tile's first run, and sketch_run_starts
// writes every run's first key index, in order. A thread takes kSketchItems consecutive keys,
// so a block's scan of its threads' counts follows the key order.
// Launch (both): one block a tile, the same block size.

template <typename Key>
__device__ __forceinline__ bool sketch_run_head(const Key* __restrict__ keys, long long e) {
  return e == 0 || keys[e] != keys[e - 1];
}

template <typename Key>
__device__ void sketch_run_tiles_impl(const Key* __restrict__ keys, long long n, long long* __restrict__ tile_runs) {
  const long long e0 = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * kSketchItems;
  long long count = 0;
#pragma unroll
  for (int i = 0; i < kSketchItems; ++i) {
    if (e0 + i < n && sketch_run_head(keys, e0 + i)) ++count;
  }
  long long total;
  sketch_block_inclusive_scan(count, SketchSum(), &total);
  if (threadIdx.x == 0) tile_runs[blockIdx.x] = total;
}

template <typename Key>
__device__ void sketch_run_starts_impl(const Key* __restrict__ keys, long long n,
                                       const long long* __restrict__ tile_first, long long* __restrict__ starts) {
  const long long e0 = ((long long)blockIdx.x * blockDim.x + threadIdx.x) * kSketchItems;
  bool head[kSketchItems];
  long long count = 0;
#pragma unroll
  for (int i = 0; i < kSketchItems; ++i) {
    head[i] = e0 + i < n && sketch_run_head(keys, e0 + i);
    count += head[i] ? 1 : 0;
  }
  long long total;
  long long at = tile_first[blockIdx.x] + sketch_block_inclusive_scan(count, SketchSum(), &total) - count;
#pragma unroll
  for (int i = 0; i < kSketchItems; ++i) {
    if (head[i]) starts[at++] = e0 + i;
  }
}

template <typename Key>
__device__ __forceinline__ long long sketch_key_column(Key key);

template <>
__device__ __forceinline__ long long sketch_key_column<unsigned int>(unsigned int) {
  return 0;
}

template <>
__device__ __forceinline__ long long sketch_key_column<unsigned long long>(unsigned long long key) {
  return (long long)(key >> 32);
}

// run_lo[c] (c = 0 .. k): column c's first run, the first whose key's column is not below c
// (*n_runs, the count of all runs, for c = k and for empty columns at the end).
// Launch: 1-D, at least k + 1 threads.
template <typename Key>
__device__ void sketch_run_lo_impl(const Key* __restrict__ keys, const long long* __restrict__ starts,
                                   const long long* __restrict__ n_runs, int k, long long* __restrict__ run_lo) {
  for (long long c = blockIdx.x * (long long)blockDim.x + threadIdx.x; c <= k; c += (long long)gridDim.x * blockDim.x) {
    long long l = 0, h = *n_runs;
    while (l < h) {
      const long long mid = l + ((h - l) >> 1);
      if (sketch_key_column(keys[starts[mid]]) < c) l = mid + 1; else h = mid;
    }
    run_lo[c] = l;
  }
}

// The column (0..k-1) whose runs [run_lo[c], run_lo[c + 1]) hold run r (the last of equal
// bounds: an empty column holds none). Any segment pointers serve: features, slots.
__device__ __forceinline__ int sketch_run_column(const long long* __restrict__ run_lo, int k, long long r) {
  int lo = 0, hi = k;  // the last c with run_lo[c] <= r
  while (hi - lo > 1) {
    const int mid = (lo + hi) >> 1;
    if (run_lo[mid] <= r) lo = mid; else hi = mid;
  }
  return lo;
}

// The runs a block's summaries keep, as candidates (run indices, ascending within a column, a
// pruned column's repeating): slot t of column c (cand_ptr[c] <= t < cand_ptr[c + 1]) holds, for a
// column kept whole (budget 0, or no more runs than the budget), its run t - cand_ptr[c]; for a
// pruned one, its first run, then sketch.prune's query q's pick for q = 1 .. budget - 2, then its
// last. Query q aims at rank d: the run i is the last with rmin + rmax <= 2d (from the column's
// third run on), and i or i + 1 is kept, whichever is nearer. starts[r]: run r's first key; a run
// ends where the next starts (n_keys after the last). Launch: 1-D, a thread a slot.
extern "C" __global__ void sketch_candidates(const long long* __restrict__ starts, long long n_runs,
                                             long long n_keys, const long long* __restrict__ run_lo,
                                             const long long* __restrict__ cand_ptr, int k, int budget,
                                             long long* __restrict__ cand) {
  const long long total = cand_ptr[k];
  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < total; t += (long long)gridDim.x * blockDim.x) {
    const int c = sketch_run_column(cand_ptr, k, t);
    const long long r0 = run_lo[c], r1 = run_lo[c + 1], j = t - cand_ptr[c];
    if (budget == 0 || r1 - r0 <= budget) {
      cand[t] = r0 + j;
      continue;
    }
    if (j == 0 || j == budget - 1) {
      cand[t] = j == 0 ? r0 : r1 - 1;
      continue;
    }
    const long long lo = starts[r0];
    auto rmin = [&](long long r) { return (double)(starts[r] - lo); };
    auto rmax = [&](long long r) { return (double)((r + 1 < n_runs ? starts[r + 1] : n_keys) - lo); };
    const double begin = rmax(r0);
    const double span = rmin(r1 - 1) - begin;
    const double dx2 = 2.0 * (((double)j * span) / (double)(budget - 1) + begin);
    long long l = r0 + 2, h = r1;  // the first run with rmin + rmax > dx2
    while (l < h) {
      const long long mid = l + ((h - l) >> 1);
      if (rmin(mid) + rmax(mid) <= dx2) l = mid + 1; else h = mid;
    }
    const long long i = l - 1;
    // Past the last run SetPrune's walk stopped: sketch.prune keeps the first run there, here the
    // last (kept by slot budget - 1 either way), so that the column's slots ascend.
    long long pick = r1 - 1;
    if (i < r1 - 1) {
      // (rmin[i] + wmin[i]) + (rmax[i + 1] - wmin[i + 1]), as sketch.prune sums them.
      const double wmin_i = rmax(i) - rmin(i), wmin_next = rmax(i + 1) - rmin(i + 1);
      pick = i + (dx2 >= (rmin(i) + wmin_i) + (rmax(i + 1) - wmin_next) ? 1 : 0);
    }
    cand[t] = pick;
  }
}

// The summary's entries from the kept runs (kept: run indices, ascending; identity: every run, no
// kept array read): a run's value, and rmin / wmin / rmax counted within its column.
template <typename Key>
__device__ void sketch_entries_impl(const Key* __restrict__ keys, long long n_keys, const long long* __restrict__ starts,
                                    long long n_runs, const long long* __restrict__ kept, int identity, long long n_kept,
                                    const long long* __restrict__ run_lo, int k, float* __restrict__ value,
                                    double* __restrict__ rmin, double* __restrict__ rmax, double* __restrict__ wmin) {
  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < n_kept; t += (long long)gridDim.x * blockDim.x) {
    const long long r = identity ? t : kept[t];
    const int c = sketch_run_column(run_lo, k, r);
    const long long lo = starts[run_lo[c]];
    const long long s = starts[r], e = r + 1 < n_runs ? starts[r + 1] : n_keys;
    value[t] = sketch_key_value((unsigned int)(keys[s] & 0xffffffffu));
    rmin[t] = (double)(s - lo);
    wmin[t] = (double)(e - s);
    rmax[t] = rmin[t] + wmin[t];
  }
}

// ---------------------------------------------------------------------------------------------
// Keeping each segment's distinct candidates (sketch/cuda.py's prune and summarize_dense; the
// array steps' keep mask): where cand[ptr[s]:ptr[s + 1]] ascends, a slot is new where it differs
// from the one before. sketch_distinct_counts counts them a segment (the host sums the counts
// into the kept entries' pointers) and sets counts[n_segments] where some segment does not ascend
// (a pruned summary whose ranks are out of order: the host then sorts the candidates, which keeps
// every segment where it is, and counts again); sketch_distinct_write writes them from out_ptr[s].
// Launch (both): blocks of a multiple of 32 threads, a warp a segment.

__device__ __forceinline__ bool sketch_distinct_slot(const long long* __restrict__ cand, long long lo, long long hi,
                                                     long long j) {
  return j < hi && (j == lo || cand[j] != cand[j - 1]);
}

extern "C" __global__ void sketch_distinct_counts(const long long* __restrict__ cand, const long long* __restrict__ ptr,
                                                  long long n_segments, long long* __restrict__ counts) {
  const long long s = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;  // one for the whole warp
  const int lane = threadIdx.x & 31;
  if (s >= n_segments) return;
  const long long lo = ptr[s], hi = ptr[s + 1];
  long long count = 0;
  bool descends = false;
  for (long long j0 = lo; j0 < hi; j0 += 32) {
    const long long j = j0 + lane;
    count += __popc(__ballot_sync(0xffffffffu, sketch_distinct_slot(cand, lo, hi, j)));
    descends |= j > lo && j < hi && cand[j] < cand[j - 1];
  }
  if (lane == 0) counts[s] = count;
  if (descends) counts[n_segments] = 1;
}

extern "C" __global__ void sketch_distinct_write(const long long* __restrict__ cand, const long long* __restrict__ ptr,
                                                 long long n_segments, const long long* __restrict__ out_ptr,
                                                 long long* __restrict__ kept) {
  const long long s = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (s >= n_segments) return;
  const long long lo = ptr[s], hi = ptr[s + 1];
  long long at = out_ptr[s];
  for (long long j0 = lo; j0 < hi; j0 += 32) {
    const bool is_new = sketch_distinct_slot(cand, lo, hi, j0 + lane);
    const unsigned mask = __ballot_sync(0xffffffffu, is_new);
    if (is_new) kept[at + __popc(mask & ((1u << lane) - 1u))] = cand[j0 + lane];
    at += __popc(mask);
  }
}

// ---------------------------------------------------------------------------------------------
// sketch.prune on a device summary (sketch/cuda.py prune; summary.prune_with is the reference):
// the candidates as sketch_candidates makes them, from the summary's float64 ranks. Feature f owns
// entries ptrs[f]:ptrs[f + 1] and slots cand_ptr[f]:cand_ptr[f + 1] (its count, or the budget where
// it holds more). A big feature's query q (slot q, 1 <= q <= budget - 2) aims at
// dx2 = 2 * ((q * span) / (budget - 1) + begin), finds the last entry i (from the third on) with
// rmin + rmax <= dx2 and keeps i or i + 1: prune_with's arithmetic, term by term.
// Launch: 1-D, a thread a slot.
extern "C" __global__ void sketch_prune_candidates(const double* __restrict__ rmin, const double* __restrict__ rmax,
                                                   const double* __restrict__ wmin, const long long* __restrict__ ptrs,
                                                   const long long* __restrict__ cand_ptr, int n_features, int budget,
                                                   long long* __restrict__ cand) {
  const long long total = cand_ptr[n_features];
  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < total; t += (long long)gridDim.x * blockDim.x) {
    const int f = sketch_run_column(cand_ptr, n_features, t);
    const long long base = ptrs[f], m = ptrs[f + 1] - base, j = t - cand_ptr[f];
    if (m <= budget || j == 0) {
      cand[t] = base + j;
      continue;
    }
    const long long last = base + m - 1;
    if (j == budget - 1) {
      cand[t] = last;
      continue;
    }
    const double begin = rmax[base];
    const double span = rmin[last] - begin;
    const double dx2 = 2.0 * (((double)j * span) / (double)(budget - 1) + begin);
    long long l = base + 2, h = base + m;  // the first entry with rmin + rmax > dx2
    while (l < h) {
      const long long mid = l + ((h - l) >> 1);
      if (rmin[mid] + rmax[mid] <= dx2) l = mid + 1; else h = mid;
    }
    const long long i = l - 1;
    // Past the last entry prune_with keeps the first (kept already); the last keeps the slots ascending.
    long long pick = last;
    if (i < last) {
      pick = i + (dx2 >= (rmin[i] + wmin[i]) + (rmax[i + 1] - wmin[i + 1]) ? 1 : 0);
    }
    cand[t] = pick;
  }
}

// The kept entries (kept: indices into the summary) gathered into the pruned summary's arrays.
// Launch: 1-D, a thread an entry.
extern "C" __global__ void sketch_gather(const long long* __restrict__ kept, long long n, const float* __restrict__ value,
                                         const double* __restrict__ rmin, const double* __restrict__ rmax,
                                         const double* __restrict__ wmin, float* __restrict__ out_value,
                                         double* __restrict__ out_rmin, double* __restrict__ out_rmax,
                                         double* __restrict__ out_wmin) {
  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < n; t += (long long)gridDim.x * blockDim.x) {
    const long long i = kept[t];
    out_value[t] = value[i];
    out_rmin[t] = rmin[i];
    out_rmax[t] = rmax[i];
    out_wmin[t] = wmin[i];
  }
}

// ---------------------------------------------------------------------------------------------
// sketch.make_cuts on a device summary already pruned to max_bin + 1 entries a feature: feature f's
// cuts are its values a[1 .. required - 1] (required = min(m, max_bin)), then the sentinel
// a[m - 1] + (|a[m - 1]| + eps); its min_value is a[0] - |a[0]| - eps. Both are summed in double
// from the float32 values and rounded to float32 once, as XGBoost (and make_cuts) do; an empty
// feature's min_value is eps (float32) and its sentinel is built from that.
// Launch: blocks of a multiple of 32 threads, a warp a feature.
extern "C" __global__ void sketch_cuts(const float* __restrict__ value, const long long* __restrict__ ptrs,
                                       long long n_features, int max_bin, const int* __restrict__ cut_ptrs,
                                       float eps, double eps64, float* __restrict__ cut_values,
                                       float* __restrict__ min_values) {
  const long long f = (blockIdx.x * (long long)blockDim.x + threadIdx.x) >> 5;
  const int lane = threadIdx.x & 31;
  if (f >= n_features) return;
  const long long lo = ptrs[f], m = ptrs[f + 1] - lo;
  const long long required = m < max_bin ? m : max_bin;
  for (long long l = 1 + lane; l < required; l += 32) cut_values[cut_ptrs[f] + l - 1] = value[lo + l];
  if (lane == 0) {
    double top;
    float min_value = eps;
    if (m > 0) {
      const double first = (double)value[lo];
      min_value = (float)(first - fabs(first) - eps64);
      top = (double)value[lo + m - 1];
    } else {
      top = (double)min_value;
    }
    min_values[f] = min_value;
    cut_values[cut_ptrs[f + 1] - 1] = (float)(top + (fabs(top) + eps64));
  }
}

// ---------------------------------------------------------------------------------------------
// Summaries of consecutive blocks of features end to end (sketch._concat_features): part p's
// entries go to part_ptr[p]:part_ptr[p + 1]; parts[4 p .. 4 p + 3] are its value, rmin, rmax and
// wmin arrays' addresses. One launch, where copies would take four a part.
// Launch: 1-D, a thread an entry.
extern "C" __global__ void sketch_concat(const unsigned long long* __restrict__ parts,
                                         const long long* __restrict__ part_ptr, int n_parts,
                                         float* __restrict__ value, double* __restrict__ rmin,
                                         double* __restrict__ rmax, double* __restrict__ wmin) {
  const long long n = part_ptr[n_parts];
  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < n; t += (long long)gridDim.x * blockDim.x) {
    const int p = sketch_run_column(part_ptr, n_parts, t);
    const long long i = t - part_ptr[p];
    value[t] = reinterpret_cast<const float*>(parts[4 * p])[i];
    rmin[t] = reinterpret_cast<const double*>(parts[4 * p + 1])[i];
    rmax[t] = reinterpret_cast<const double*>(parts[4 * p + 2])[i];
    wmin[t] = reinterpret_cast<const double*>(parts[4 * p + 3])[i];
  }
}

// ---------------------------------------------------------------------------------------------
// sketch.merge on device summaries (sketch/cuda.py merge; the array steps in sketch/__init__.py
// are the reference): x's every entry placed among y's entries of its feature, then both sides'
// entries written where the merged, strictly increasing order puts them, then FixError.
//
// sketch_merge_ranks: for x's entry i of feature f, j[i] = the number of y's entries of f below
// its value, as an index into y (y_ptrs[f] + that), and eq[i] = 1 where y holds the same value.
// Values compare by their order keys, as the reference's searchsorted over (feature, value) keys
// does (-0.0 is 0.0). shared[f] (count_shared) counts the values both hold.
// Launch: 1-D, a thread an entry of x.
extern "C" __global__ void sketch_merge_ranks(const float* __restrict__ x_value, const long long* __restrict__ x_ptrs,
                                              long long n_x, const float* __restrict__ y_value,
                                              const long long* __restrict__ y_ptrs, int n_features,
                                              long long* __restrict__ j_out, unsigned char* __restrict__ eq_out,
                                              unsigned long long* __restrict__ shared, int count_shared) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n_x; i += (long long)gridDim.x * blockDim.x) {
    const int f = sketch_run_column(x_ptrs, n_features, i);
    const unsigned int key = sketch_value_key(x_value[i]);
    const long long hi = y_ptrs[f + 1];
    long long l = y_ptrs[f], h = hi;
    while (l < h) {
      const long long mid = l + ((h - l) >> 1);
      if (sketch_value_key(y_value[mid]) < key) l = mid + 1; else h = mid;
    }
    const bool equal = l < hi && sketch_value_key(y_value[l]) == key;
    j_out[i] = l;
    eq_out[i] = equal ? 1 : 0;
    if (equal && count_shared) atomicAdd(shared + f, 1ull);
  }
}

// What y adds to the rank bounds of x's entry that y does not hold (j: y's entries below it, as an
// index into y; j_after: j, or j + 1 past an equal one): rmin grows by what y certainly holds below
// the value, rmax by what y may hold at or below it. The reference's clipped indices, kept.
__device__ __forceinline__ void sketch_merge_adds(const double* __restrict__ y_rmin, const double* __restrict__ y_rmax,
                                                  const double* __restrict__ y_wmin, long long n_y, long long y_lo,
                                                  long long y_hi, long long j, long long j_after, double* add_rmin,
                                                  double* add_rmax) {
  const long long last = n_y > 0 ? n_y - 1 : 0;
  auto clip = [last](long long v) { return v < 0 ? 0 : (v > last ? last : v); };
  *add_rmin = 0.0;
  if (j > y_lo) {
    const long long prev = clip(j - 1);
    *add_rmin = y_rmin[prev] + y_wmin[prev];
  }
  if (j_after < y_hi) {
    const long long nxt = j_after < last ? j_after : last;
    *add_rmax = y_rmax[nxt] - y_wmin[nxt];
  } else {
    *add_rmax = y_hi > y_lo ? y_rmax[clip(y_hi - 1)] : 0.0;
  }
}

// sketch_merge_write: feature f's merged entries from out_ptrs[f] on. An entry's place is its own
// side's entries below it, plus the other side's below it, less the values both hold counted twice
// (a block scan of eq over the feature); a value both hold is written once, from a, with both
// sides' ranks and weights summed. Launch: one block a feature.
extern "C" __global__ void sketch_merge_write(
    const float* __restrict__ a_value, const double* __restrict__ a_rmin, const double* __restrict__ a_rmax,
    const double* __restrict__ a_wmin, const long long* __restrict__ a_ptrs, long long n_a,
    const long long* __restrict__ ja, const unsigned char* __restrict__ eq_a, const float* __restrict__ b_value,
    const double* __restrict__ b_rmin, const double* __restrict__ b_rmax, const double* __restrict__ b_wmin,
    const long long* __restrict__ b_ptrs, long long n_b, const long long* __restrict__ jb,
    const unsigned char* __restrict__ eq_b, const long long* __restrict__ out_ptrs, float* __restrict__ value,
    double* __restrict__ rmin, double* __restrict__ rmax, double* __restrict__ wmin) {
  const int f = blockIdx.x;
  const long long a_lo = a_ptrs[f], a_hi = a_ptrs[f + 1], b_lo = b_ptrs[f], b_hi = b_ptrs[f + 1];
  const long long out_lo = out_ptrs[f];
  const long long jc_last = n_b > 0 ? n_b - 1 : 0;
  long long carry = 0;
  for (long long i0 = a_lo; i0 < a_hi; i0 += blockDim.x) {
    const long long i = i0 + threadIdx.x;
    const long long eq = i < a_hi ? (long long)eq_a[i] : 0;
    long long total;
    const long long shared_below = carry + sketch_block_inclusive_scan(eq, SketchSum(), &total) - eq;
    carry += total;
    if (i >= a_hi) continue;
    const long long j = ja[i];
    const long long at = out_lo + (i - a_lo) + (j - b_lo) - shared_below;
    value[at] = a_value[i];
    if (eq) {
      const long long jc = j < jc_last ? j : jc_last;
      rmin[at] = a_rmin[i] + b_rmin[jc];
      rmax[at] = a_rmax[i] + b_rmax[jc];
      wmin[at] = a_wmin[i] + b_wmin[jc];
    } else {
      double add_rmin, add_rmax;
      sketch_merge_adds(b_rmin, b_rmax, b_wmin, n_b, b_lo, b_hi, j, j, &add_rmin, &add_rmax);
      rmin[at] = a_rmin[i] + add_rmin;
      rmax[at] = a_rmax[i] + add_rmax;
      wmin[at] = a_wmin[i] + 0.0;  // the reference's a.wmin + where(eq, ..., 0.0): -0.0 becomes 0.0 there too
    }
  }
  carry = 0;
  for (long long i0 = b_lo; i0 < b_hi; i0 += blockDim.x) {
    const long long i = i0 + threadIdx.x;
    const long long eq = i < b_hi ? (long long)eq_b[i] : 0;
    long long total;
    const long long shared_below = carry + sketch_block_inclusive_scan(eq, SketchSum(), &total) - eq;
    carry += total;
    if (i >= b_hi || eq) continue;
    const long long j = jb[i];
    const long long at = out_lo + (i - b_lo) + (j - a_lo) - shared_below;
    double add_rmin, add_rmax;
    sketch_merge_adds(a_rmin, a_rmax, a_wmin, n_a, a_lo, a_hi, j, j, &add_rmin, &add_rmax);
    value[at] = b_value[i];
    rmin[at] = b_rmin[i] + add_rmin;
    rmax[at] = b_rmax[i] + add_rmax;
    wmin[at] = b_wmin[i];
  }
}

// FixError (sketch._fix_error): per feature, rmin <- its running maximum, then
// rmax <- the running maximum of max(rmax, rmin + wmin). Where the ranks are already in order
// (as they nearly always are) both come back unchanged, so no check decides whether to run it.
// Launch: one block a feature.
extern "C" __global__ void sketch_fix_error(const double* __restrict__ rmin, const double* __restrict__ rmax,
                                            const double* __restrict__ wmin, const long long* __restrict__ ptrs,
                                            double* __restrict__ out_rmin, double* __restrict__ out_rmax) {
  const long long lo = ptrs[blockIdx.x], hi = ptrs[blockIdx.x + 1];
  double rmin_before = 0.0, floor_before = 0.0;  // the maxima through the previous chunk
  for (long long i0 = lo; i0 < hi; i0 += blockDim.x) {
    const long long i = i0 + threadIdx.x;
    const long long in = i < hi ? i : hi - 1;  // past the end: a copy of the last, which feeds no one
    double total;
    double r = sketch_block_inclusive_scan(rmin[in], SketchMax(), &total);
    if (i0 > lo) r = SketchMax()(rmin_before, r);
    rmin_before = i0 > lo ? SketchMax()(rmin_before, total) : total;
    const double sum = r + wmin[in];
    double floor = rmax[in] >= sum ? rmax[in] : sum;  // np.maximum(rmax, rmin + wmin)
    floor = sketch_block_inclusive_scan(floor, SketchMax(), &total);
    if (i0 > lo) floor = SketchMax()(floor_before, floor);
    floor_before = i0 > lo ? SketchMax()(floor_before, total) : total;
    if (i < hi) {
      out_rmin[i] = r;
      out_rmax[i] = floor;
    }
  }
}

#define SKETCH_KEYED(KEY, SUFFIX)                                                                                \
  extern "C" __global__ void sketch_keys_##SUFFIX(const float* x, long long rows, int k, long long row_stride,      \
                                                  long long col_stride, float missing, int missing_is_nan,        \
                                                  KEY* keys, unsigned long long* found) {                         \
    sketch_keys_impl<KEY>(x, rows, k, row_stride, col_stride, missing, missing_is_nan, keys, found);              \
  }                                                                                                               \
  extern "C" __global__ void sketch_run_tiles_##SUFFIX(const KEY* keys, long long n, long long* tile_runs) {        \
    sketch_run_tiles_impl<KEY>(keys, n, tile_runs);                                                               \
  }                                                                                                               \
  extern "C" __global__ void sketch_run_starts_##SUFFIX(const KEY* keys, long long n, const long long* tile_first, \
                                                        long long* starts) {                                      \
    sketch_run_starts_impl<KEY>(keys, n, tile_first, starts);                                                     \
  }                                                                                                               \
  extern "C" __global__ void sketch_run_lo_##SUFFIX(const KEY* keys, const long long* starts,                      \
                                                    const long long* n_runs, int k, long long* run_lo) {          \
    sketch_run_lo_impl<KEY>(keys, starts, n_runs, k, run_lo);                                                     \
  }                                                                                                               \
  extern "C" __global__ void sketch_entries_##SUFFIX(const KEY* keys, long long n_keys, const long long* starts,   \
                                                     long long n_runs, const long long* kept, int identity,       \
                                                     long long n_kept, const long long* run_lo, int k,            \
                                                     float* value, double* rmin, double* rmax, double* wmin) {    \
    sketch_entries_impl<KEY>(keys, n_keys, starts, n_runs, kept, identity, n_kept, run_lo, k, value, rmin, rmax,  \
                             wmin);                                                                               \
  }

SKETCH_KEYED(unsigned int, u32)
SKETCH_KEYED(unsigned long long, u64)
