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

// head[i] = 1 where sorted key i starts a run of equal keys (one value of one column).
template <typename Key>
__device__ void sketch_run_heads_impl(const Key* __restrict__ keys, long long n, unsigned char* __restrict__ head) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    head[i] = (i == 0 || keys[i] != keys[i - 1]) ? 1 : 0;
  }
}

// The column (0..k-1) whose runs [run_lo[c], run_lo[c + 1]) hold run r (the last of equal
// bounds: an empty column holds none).
__device__ __forceinline__ int sketch_run_column(const long long* __restrict__ run_lo, int k, long long r) {
  int lo = 0, hi = k;  // the last c with run_lo[c] <= r
  while (hi - lo > 1) {
    const int mid = (lo + hi) >> 1;
    if (run_lo[mid] <= r) lo = mid; else hi = mid;
  }
  return lo;
}

// The runs a block's summaries keep, as candidates (run indices; a pruned column's repeat):
// slot t of column c (cand_ptr[c] <= t < cand_ptr[c + 1]) holds, for a column kept whole
// (budget 0, or no more runs than the budget), its run t - cand_ptr[c]; for a pruned one,
// its first run, then sketch.prune's query q's pick for q = 1 .. budget - 2, then its last.
// Query q aims at rank d: the run i is the last with rmin + rmax <= 2d (from the column's
// third run on), and i or i + 1 is kept, whichever is nearer. starts[r]: run r's first key;
// a run ends where the next starts (n_keys after the last). Launch: 1-D, a thread a slot.
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
    long long pick = r0;  // past the last run: SetPrune's walk stopped there; the first is kept already
    if (i < r1 - 1) {
      // (rmin[i] + wmin[i]) + (rmax[i + 1] - wmin[i + 1]), as sketch.prune sums them.
      const double wmin_i = rmax(i) - rmin(i), wmin_next = rmax(i + 1) - rmin(i + 1);
      pick = i + (dx2 >= (rmin(i) + wmin_i) + (rmax(i + 1) - wmin_next) ? 1 : 0);
    }
    cand[t] = pick;
  }
}

// The summary's entries from the kept runs (kept: run indices, ascending): a run's value, and
// rmin / wmin / rmax counted within its column.
template <typename Key>
__device__ void sketch_entries_impl(const Key* __restrict__ keys, long long n_keys, const long long* __restrict__ starts,
                                    long long n_runs, const long long* __restrict__ kept, long long n_kept,
                                    const long long* __restrict__ run_lo, int k, float* __restrict__ value,
                                    double* __restrict__ rmin, double* __restrict__ rmax, double* __restrict__ wmin) {
  for (long long t = blockIdx.x * (long long)blockDim.x + threadIdx.x; t < n_kept; t += (long long)gridDim.x * blockDim.x) {
    const long long r = kept[t];
    const int c = sketch_run_column(run_lo, k, r);
    const long long lo = starts[run_lo[c]];
    const long long s = starts[r], e = r + 1 < n_runs ? starts[r + 1] : n_keys;
    value[t] = sketch_key_value((unsigned int)(keys[s] & 0xffffffffu));
    rmin[t] = (double)(s - lo);
    wmin[t] = (double)(e - s);
    rmax[t] = rmin[t] + wmin[t];
  }
}

#define SKETCH_KEYED(KEY, SUFFIX)                                                                              \
  extern "C" __global__ void sketch_keys_##SUFFIX(const float* x, long long rows, int k, long long row_stride,    \
                                                  long long col_stride, float missing, int missing_is_nan,      \
                                                  KEY* keys, unsigned long long* found) {                       \
    sketch_keys_impl<KEY>(x, rows, k, row_stride, col_stride, missing, missing_is_nan, keys, found);            \
  }                                                                                                             \
  extern "C" __global__ void sketch_run_heads_##SUFFIX(const KEY* keys, long long n, unsigned char* head) {      \
    sketch_run_heads_impl<KEY>(keys, n, head);                                                                  \
  }                                                                                                             \
  extern "C" __global__ void sketch_entries_##SUFFIX(const KEY* keys, long long n_keys, const long long* starts, \
                                                     long long n_runs, const long long* kept, long long n_kept, \
                                                     const long long* run_lo, int k, float* value,              \
                                                     double* rmin, double* rmax, double* wmin) {                \
    sketch_entries_impl<KEY>(keys, n_keys, starts, n_runs, kept, n_kept, run_lo, k, value, rmin, rmax, wmin);   \
  }

SKETCH_KEYED(unsigned int, u32)
SKETCH_KEYED(unsigned long long, u64)
