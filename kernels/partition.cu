// Rows per node: stable partition of each split node's ridx segment into its children
// (partition/cuda.py apply_splits; partition/reference.py is the reference).
//
// Each split node's segment is cut into tiles of kPartitionTileRows rows, one block per tile.
// partition_count decides every row's side, parks the row with its side in `scratch`
// (same slot as in ridx, so the scatter may overwrite ridx) and counts the tile's
// left rows. partition_scatter gives each tile its place from the counts of its
// node's earlier tiles and writes the left rows at the front of the segment, the
// right rows after them, each in their old order, and the children's (start, count)
// into the device's segment table. No scan over all rows, no host work between the
// two launches, and the host need not wait: histogram launches read the children's
// segments from the table (see histogram.cu).
//
// `info` holds the level's splits as int64 (PartitionInfo, layouts.py PARTITION_INFO): a
// header (k splits, n_tiles tiles), then `stride` (>= k) entries per field, then the tiles:
//   k | n_tiles | start[S] | count[S] | feature[S] | bin[S] | default_left[S] | left_id[S] |
//   right_id[S] | row_offset[S] | category_row[S] | first_tile[S+1] | tile_split[n_tiles]   (S = stride)
// Split i owns tiles first_tile[i] .. first_tile[i+1]-1; tile_split[b] is the split of tile b.
// A categorical split (category_row[i] >= 0) sends a row right when its bin (a categorical
// feature's bin is the row's category) is in the set category_sets[category_row[i] *
// category_words ..][0 .. category_words) (category_sets.py's bitsets), left when it is not,
// and a missing value the default way; category_row[i] < 0 is a numeric split.
// The host writes it with stride k and launches n_tiles blocks; growth.cu writes it on the
// device, and the host launches an upper bound of blocks (those past n_tiles return).
//
// ridx holds "virtual" rows: a forest of K trees grown together (multiclass) numbers
// the rows of tree c as c * n_rows + row, so row_offset[i] (the split node's tree
// times n_rows) turns a virtual row back into its ELLPACK row. A single tree has
// offset 0. Virtual rows are below 2**31 (the host checks), so bit 31 of a parked
// row is free for its side. Rows learn their leaf once a tree is grown (label_rows),
// not at every level.
#include "common.cuh"

constexpr long long kTileRows = kPartitionTileRows;
constexpr uint32_t kLeftBit = 0x80000000u;

struct LevelSplits {
  const long long* start;
  const long long* count;
  const long long* feature;
  const long long* bin;
  const long long* default_left;
  const long long* left_id;
  const long long* right_id;
  const long long* row_offset;
  const long long* category_row;
  const long long* first_tile;
  const long long* tile_split;

  long long n_tiles;

  __device__ LevelSplits(const long long* info, int stride) : LevelSplits(info, PartitionInfo(stride)) {}
  __device__ LevelSplits(const long long* info, const PartitionInfo& at)
      : start(info + at.start),
        count(info + at.count),
        feature(info + at.feature),
        bin(info + at.bin),
        default_left(info + at.default_left),
        left_id(info + at.left_id),
        right_id(info + at.right_id),
        row_offset(info + at.row_offset),
        category_row(info + at.category_row),
        first_tile(info + at.first_tile),
        tile_split(info + at.tile_split),
        n_tiles(info[at.n_tiles]) {}
};

// Sum of v over the block (every thread gets it). `buf`: 32 ints of shared memory.
__device__ __forceinline__ long long block_sum(long long v, long long* buf) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  __syncthreads();  // buf may still be read from an earlier call
  if (lane == 0) buf[warp] = v;
  __syncthreads();
  long long total = 0;
  const int n_warps = (blockDim.x + 31) >> 5;
  for (int w = 0; w < n_warps; ++w) total += buf[w];
  return total;
}

// tile_left[b] = left rows of tile b. Launch: grid (at least n_tiles), block a multiple of 32 (<= 1024).
template <bool kDense>
__global__ void partition_count(const EllpackView ell, const uint32_t* __restrict__ ridx,
                                const long long* __restrict__ info, int stride, uint32_t* __restrict__ scratch,
                                int32_t* __restrict__ tile_left, const uint32_t* __restrict__ category_sets,
                                int category_words) {
  const uint32_t* __restrict__ words = ell.words;
  const int bits = ell.bits, row_stride = ell.row_stride;
  const uint32_t null_symbol = ell.null_symbol;
  const int32_t* __restrict__ ptrs = ell.ptrs;
  __shared__ long long buf[32];
  const LevelSplits s(info, stride);
  if ((long long)blockIdx.x >= s.n_tiles) return;
  const int i = (int)s.tile_split[blockIdx.x];
  const long long begin = s.start[i] + (blockIdx.x - s.first_tile[i]) * (long long)kTileRows;
  const long long end = min(s.start[i] + s.count[i], begin + kTileRows);
  const int f = (int)s.feature[i];
  const long long split_bin = s.bin[i];
  const bool default_left = s.default_left[i] != 0;
  const unsigned long long offset = (unsigned long long)s.row_offset[i];
  const long long category_row = s.category_row[i];
  const uint32_t* set = category_row >= 0 ? category_sets + category_row * (long long)category_words : nullptr;
  long long n_left = 0;
  for (long long t = begin + threadIdx.x; t < end; t += blockDim.x) {
    const uint32_t row = ridx[t];
    const int b = ellpack_feature_bin<kDense>(words, bits, (row - offset) * (unsigned long long)row_stride,
                                              row_stride, null_symbol, ptrs, f);
    const bool left = b < 0 ? default_left
                            : (set != nullptr ? !in_category_set(set, category_words, b) : (long long)b <= split_bin);
    scratch[t] = left ? (row | kLeftBit) : row;
    n_left += left;
  }
  n_left = block_sum(n_left, buf);
  if (threadIdx.x == 0) tile_left[blockIdx.x] = (int32_t)n_left;
}

// Moves the parked rows to their children's segments; n_left[i] = left rows of split i
// and segs[node] = (start, count) of its children (written by the split's first tile;
// the host, or growth.cu, fills both in for splits without rows). Launch: as partition_count.
__global__ void partition_scatter(const uint32_t* __restrict__ scratch, const int32_t* __restrict__ tile_left,
                                  const long long* __restrict__ info, int stride, uint32_t* __restrict__ ridx,
                                  long long* __restrict__ segs, long long* __restrict__ n_left) {
  __shared__ long long buf[32];
  __shared__ int warp_before[32];
  __shared__ int chunk_left;
  const LevelSplits s(info, stride);
  if ((long long)blockIdx.x >= s.n_tiles) return;
  const int i = (int)s.tile_split[blockIdx.x];
  const long long t0 = s.first_tile[i], t1 = s.first_tile[i + 1];
  // Left rows of this split's earlier tiles, and of all its tiles.
  long long before = 0, total = 0;
  for (long long b = t0 + threadIdx.x; b < t1; b += blockDim.x) {
    const long long c = tile_left[b];
    total += c;
    if (b < (long long)blockIdx.x) before += c;
  }
  before = block_sum(before, buf);
  total = block_sum(total, buf);
  const long long start = s.start[i];
  const long long begin = start + (blockIdx.x - t0) * (long long)kTileRows;
  const long long end = min(start + s.count[i], begin + kTileRows);
  if (blockIdx.x == t0 && threadIdx.x == 0) {
    n_left[i] = total;
    const long long lid = s.left_id[i], rid = s.right_id[i];
    segs[2 * lid] = start;
    segs[2 * lid + 1] = total;
    segs[2 * rid] = start + total;
    segs[2 * rid + 1] = s.count[i] - total;
  }
  long long left_at = start + before;                            // next left row's slot
  long long right_at = start + total + (begin - start - before);  // next right row's slot
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int n_warps = (blockDim.x + 31) >> 5;
  for (long long chunk = begin; chunk < end; chunk += blockDim.x) {
    const long long t = chunk + threadIdx.x;
    const bool valid = t < end;
    const uint32_t v = valid ? scratch[t] : 0u;
    const bool left = valid && (v & kLeftBit);
    const unsigned ballot = __ballot_sync(0xffffffffu, left);
    __syncthreads();  // warp_before and chunk_left of the previous chunk are read
    if (lane == 0) warp_before[warp] = __popc(ballot);
    __syncthreads();
    if (warp == 0) {
      const int c = lane < n_warps ? warp_before[lane] : 0;
      int incl = c;
      for (int o = 1; o < 32; o <<= 1) {
        const int u = __shfl_up_sync(0xffffffffu, incl, o);
        if (lane >= o) incl += u;
      }
      if (lane < n_warps) warp_before[lane] = incl - c;
      if (lane == 31) chunk_left = incl;
    }
    __syncthreads();
    const int lefts_before = warp_before[warp] + __popc(ballot & ((1u << lane) - 1u));
    if (valid) {
      const uint32_t row = v & ~kLeftBit;
      const long long dest = left ? left_at + lefts_before : right_at + threadIdx.x - lefts_before;
      ridx[dest] = row;
    }
    const long long n_valid = min((long long)blockDim.x, end - chunk);
    left_at += chunk_left;
    right_at += n_valid - chunk_left;
  }
}

// positions[row] = node for every row of the given nodes' segments.
// info: int64 start[k] | count[k] | node[k] | first_tile[k+1] | tile_node[n_tiles] (LabelInfo,
// stride k), tiles of kTileRows. Launch: grid (n_tiles), any block size.
__global__ void label_rows(const uint32_t* __restrict__ ridx, const long long* __restrict__ info, int k,
                           int32_t* __restrict__ positions) {
  const LabelInfo at(k);
  const long long* start = info + at.start;
  const long long* count = info + at.count;
  const long long* node = info + at.node;
  const long long* first_tile = info + at.first_tile;
  const int i = (int)info[at.tile_node + blockIdx.x];
  const long long begin = start[i] + (blockIdx.x - first_tile[i]) * (long long)kTileRows;
  const long long end = min(start[i] + count[i], begin + kTileRows);
  const int32_t id = (int32_t)node[i];
  for (long long t = begin + threadIdx.x; t < end; t += blockDim.x) positions[ridx[t]] = id;
}

#ifdef DASKGB_NVCC_CHECK  // offline compile check; NVRTC instantiates through name_expressions
template __global__ void partition_count<true>(const EllpackView, const uint32_t*, const long long*, int, uint32_t*,
                                               int32_t*, const uint32_t*, int);
template __global__ void partition_count<false>(const EllpackView, const uint32_t*, const long long*, int, uint32_t*,
                                                int32_t*, const uint32_t*, int);
#endif
