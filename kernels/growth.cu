// A depthwise tree grown level by level with no host work between the levels
// (growth/device.py; growth/host.py and growth/driver.py are the reference, and the trees
// are the same to the bit).
//
// The host launches the same kernels for every tree, each sized for the most nodes its
// level can have. The kernels here decide on the device what the host's grower decides:
// which evaluated nodes split (driver.Driver.pop, split/rules.py splits_applied), the
// children's ids, weights and covers (host.py's _Growth.expand, tree.TreeBuilder), the
// partition's splits and tiles (partition.cu's info), which child of each split is built and
// the histogram tiles (host.py's _Growth.children, histogram/cuda.py tiles_of), and the next
// level's node count (split.cu's k_live). The host reads the finished tree once.
//
// The tree's buffers (TreeBuffers, layouts.py): tree: kFields rows of `cap` 32-bit words in
// TreeField order (floats as their bits), then one row whose first word is the number of
// nodes; state: GrowthState (int64); segs: (cap, 2) each node's (start, count) of ridx;
// part_info, child_info, hist_tiles: the level's launches' inputs (PartitionInfo and
// ChildrenInfo with stride part_stride, histogram tiles of tile_rows rows).
#include "common.cuh"
#include "split_math.cuh"

struct TreeView {
  int* a;
  int cap;
  __device__ __forceinline__ int& at(int field, long long node) const { return a[(long long)field * cap + node]; }
  __device__ __forceinline__ void set_float(int field, long long node, float v) const {
    at(field, node) = __float_as_int(v);
  }
  __device__ __forceinline__ void set_count(long long n) const { a[(long long)kFields * cap] = (int)n; }
};

// A new leaf (tree.py TreeBuilder.add_children): value is the weight times the learning rate, in float.
__device__ __forceinline__ void write_leaf(const TreeView& t, long long node, long long parent, int depth, float weight,
                                           float eta, double cover) {
  t.at(kLeft, node) = -1;
  t.at(kRight, node) = -1;
  t.at(kParent, node) = (int)parent;
  t.at(kFeature, node) = -1;
  t.at(kBin, node) = -1;
  t.set_float(kThreshold, node, 0.0f);
  t.at(kDefaultLeft, node) = 0;
  t.set_float(kValue, node, __fmul_rn(weight, eta));
  t.set_float(kBaseWeight, node, weight);
  t.set_float(kGain, node, 0.0f);
  t.set_float(kCover, node, (float)cover);
  t.at(kDepth, node) = depth;
}

// Node 0 from the root's (2,) int64 gradient sums times scale (host.py's _Growth.root), the
// root's segment (all n_rows rows), and the state of level 0: one candidate, the root.
// Launch: one thread.
__global__ void grow_root(const long long* __restrict__ sums, const double* __restrict__ scale, const SplitParams p,
                          long long n_rows, const TreeBuffers b) {
  long long* __restrict__ state = b.state;
  long long* __restrict__ segs = b.segs;
  const float eta = p.eta;
  const double G = (double)sums[0] * scale[0], H = (double)sums[1] * scale[1];
  const TreeView t{b.tree, b.cap};
  write_leaf(t, 0, -1, 0, calc_weight(G, H, p), eta, H);
  t.set_count(1);
  state[kNodes] = 1;
  state[kCandidates] = 1;
  state[kFirstCandidate] = 0;
  state[kSplits] = 0;
  segs[0] = 0;
  segs[1] = n_rows;
}

// Exclusive prefix sum over the block (all threads call it); *total gets the block's sum.
// buf: 33 long longs of shared memory.
__device__ __forceinline__ long long block_exclusive_scan(long long v, long long* total, long long* buf) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int n_warps = (blockDim.x + 31) >> 5;
  long long incl = v;
  for (int o = 1; o < 32; o <<= 1) {
    const long long u = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += u;
  }
  __syncthreads();  // buf may still be read from an earlier call
  if (lane == 31) buf[warp] = incl;
  __syncthreads();
  if (warp == 0) {
    const long long w = lane < n_warps ? buf[lane] : 0;
    long long wi = w;
    for (int o = 1; o < 32; o <<= 1) {
      const long long u = __shfl_up_sync(0xffffffffu, wi, o);
      if (lane >= o) wi += u;
    }
    if (lane < n_warps) buf[lane] = wi - w;  // warps before this one
    if (lane == 31) buf[32] = wi;
  }
  __syncthreads();
  *total = buf[32];
  return buf[warp] + incl - v;
}

// In place: x[0..n) becomes its exclusive prefix sum and x[n] the total (shared memory).
__device__ void block_exclusive_scan_array(long long* x, int n, long long* buf) {
  long long carry = 0;
  for (int base = 0; base < n; base += blockDim.x) {
    const int i = base + threadIdx.x;
    const long long v = i < n ? x[i] : 0;
    long long total;
    const long long e = block_exclusive_scan(v, &total, buf);
    if (i < n) x[i] = carry + e;
    carry += total;
  }
  if (threadIdx.x == 0) x[n] = carry;
  __syncthreads();
}

// The owner of item b: the largest i < k with first[i] <= b (first ascending, first[0] = 0).
__device__ __forceinline__ int owner_of(const long long* first, int k, long long b) {
  int lo = 0, hi = k - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) >> 1;
    if (first[mid] <= b) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  return lo;
}

// One depthwise level: the candidates' split records -> the splits, the tree's new nodes
// and the launches' inputs.
// recs: the candidates' records (split.cu's output, candidate i is node first + i).
// depth: the candidates' depth; grow_children: their children are evaluated in turn
// (driver.child_valid: depth + 1 < max_depth), so histogram tiles and the next level's
// candidates are written.
// b.part_info: partition.cu's info with stride b.part_stride (>= candidates).
// b.child_info: histogram_children.cu's info with stride b.part_stride.
// b.hist_tiles: histogram.cu's tiles for the children built, of b.tile_rows rows: a split's
// children's rows are not counted yet, so each gets as many tiles as its parent's rows
// need (the surplus return at once).
// Launch: one block (of up to 1024 threads).
__global__ void __launch_bounds__(1024) expand_level(const SplitRecord* __restrict__ recs, int depth,
                                                     int grow_children, const SplitParams p, const TreeBuffers b) {
  __shared__ long long buf[33];
  __shared__ long long first_part[kMaxSplits + 1];
  __shared__ long long first_hist[kMaxSplits + 1];
  const float min_split_loss = p.min_split_loss, eta = p.eta;
  long long* __restrict__ state = b.state;
  long long* __restrict__ segs = b.segs;
  long long* __restrict__ part_info = b.part_info;
  long long* __restrict__ child_info = b.child_info;
  long long* __restrict__ hist_tiles = b.hist_tiles;
  const long long tile_rows = b.tile_rows;
  const TreeView t{b.tree, b.cap};
  const long long n_cand = state[kCandidates], first = state[kFirstCandidate], n_nodes = state[kNodes];
  const PartitionInfo part_at(b.part_stride);
  const ChildrenInfo child_at(b.part_stride);
  long long* start = part_info + part_at.start;
  long long* count = part_info + part_at.count;
  long long* feature = part_info + part_at.feature;
  long long* bin = part_info + part_at.bin;
  long long* default_left = part_info + part_at.default_left;
  long long* left_id = part_info + part_at.left_id;
  long long* right_id = part_info + part_at.right_id;
  long long* row_offset = part_info + part_at.row_offset;
  long long* first_tile = part_info + part_at.first_tile;
  long long* tile_split = part_info + part_at.tile_split;
  long long* parent_row = child_info + child_at.parent_row;
  long long* build_right = child_info + child_at.build_right;

  // Which candidates split (in id order, as the driver pops them), and their ranks.
  long long k = 0;
  for (long long base = 0; base < n_cand; base += blockDim.x) {
    const long long i = base + threadIdx.x;
    bool valid = false;
    SplitRecord r;
    if (i < n_cand) {
      r = recs[i];
      // split/rules.py splits_applied; the gain compares as a double, as the host's numpy does.
      valid = r.feature >= 0 && (double)r.gain > kRtEps && r.left_hess != 0.0 && r.right_hess != 0.0 &&
              r.gain >= min_split_loss;
    }
    long long total;
    const long long rank = k + block_exclusive_scan(valid ? 1 : 0, &total, buf);
    if (valid) {
      const long long nid = first + i;
      const long long lid = n_nodes + 2 * rank, rid = lid + 1;
      // TreeBuilder.split, then add_children's two leaves.
      t.at(kFeature, nid) = r.feature;
      t.at(kBin, nid) = r.bin;
      t.set_float(kThreshold, nid, r.threshold);
      t.at(kDefaultLeft, nid) = r.default_left != 0;
      t.set_float(kGain, nid, r.gain);
      t.at(kLeft, nid) = (int)lid;
      t.at(kRight, nid) = (int)rid;
      t.set_float(kValue, nid, 0.0f);
      write_leaf(t, lid, nid, depth + 1, calc_weight(r.left_grad, r.left_hess, p), eta, r.left_hess);
      write_leaf(t, rid, nid, depth + 1, calc_weight(r.right_grad, r.right_hess, p), eta, r.right_hess);
      // The partition's split: both children start empty at the node's start, which
      // partition_scatter overwrites for a node with rows.
      const long long s0 = segs[2 * nid], c0 = segs[2 * nid + 1];
      start[rank] = s0;
      count[rank] = c0;
      feature[rank] = r.feature;
      bin[rank] = r.bin;
      default_left[rank] = r.default_left;
      left_id[rank] = lid;
      right_id[rank] = rid;
      row_offset[rank] = 0;
      segs[2 * lid] = s0;
      segs[2 * lid + 1] = 0;
      segs[2 * rid] = s0;
      segs[2 * rid + 1] = 0;
      // The child with the smaller hessian sum is built, its sibling subtracted.
      const bool right = r.right_hess < r.left_hess;
      parent_row[rank] = i;
      build_right[rank] = right;
      first_part[rank] = (c0 + kPartitionTileRows - 1) / kPartitionTileRows;
      first_hist[rank] = grow_children ? (c0 + tile_rows - 1) / tile_rows : 0;
    }
    k += total;
  }
  __syncthreads();
  const int kk = (int)k;
  block_exclusive_scan_array(first_part, kk, buf);
  block_exclusive_scan_array(first_hist, kk, buf);
  const long long n_part_tiles = first_part[kk], n_hist_tiles = first_hist[kk];
  for (int i = threadIdx.x; i <= kk; i += blockDim.x) first_tile[i] = first_part[i];
  for (long long j = threadIdx.x; j < n_part_tiles; j += blockDim.x) tile_split[j] = owner_of(first_part, kk, j);
  for (long long j = threadIdx.x; j < n_hist_tiles; j += blockDim.x) {
    const int i = owner_of(first_hist, kk, j);
    const long long lid = n_nodes + 2 * (long long)i;
    long long* row = hist_tiles + kTileColumns * (j + 1);
    row[kTileSlot] = i;
    row[kTileNode] = build_right[i] ? lid + 1 : lid;  // written above by this block
    row[kTileIndex] = j - first_hist[i];
    row[kTileRowOffset] = 0;
  }
  if (threadIdx.x == 0) {
    part_info[part_at.k] = k;
    part_info[part_at.n_tiles] = n_part_tiles;
    child_info[child_at.k] = k;
    if (grow_children) {
      hist_tiles[0] = n_hist_tiles;  // the header row: (n_tiles, 0, ...)
      for (int c = 1; c < kTileColumns; ++c) hist_tiles[c] = 0;
    }
    state[kNodes] = n_nodes + 2 * k;
    state[kCandidates] = grow_children ? 2 * k : 0;
    state[kFirstCandidate] = n_nodes;
    state[kSplits] = k;
    t.set_count(n_nodes + 2 * k);
  }
}

// positions[row] = the leaf of every row once the tree is grown, as the forest's node id
// leaf * n_trees + tree (host.py grow_forest's numbering: tree `tree` of n_trees grown in a
// round): block (node, chunk) labels chunk blockIdx.y of the node's segment when the node
// is a leaf. Launch: grid (cap, chunks), any block size.
__global__ void label_leaves(const TreeBuffers b, const uint32_t* __restrict__ ridx, int n_trees, int tree_index,
                             int32_t* __restrict__ positions) {
  const long long* __restrict__ segs = b.segs;
  const long long node = blockIdx.x;
  if (node >= b.state[kNodes] || b.tree[(long long)kLeft * b.cap + node] != -1) return;
  const long long start = segs[2 * node], count = segs[2 * node + 1];
  const long long per = (count + gridDim.y - 1) / gridDim.y;
  const long long begin = start + blockIdx.y * per;
  const long long end = min(start + count, begin + per);
  const int32_t id = (int32_t)(node * n_trees + tree_index);
  for (long long i = begin + threadIdx.x; i < end; i += blockDim.x) positions[ridx[i]] = id;
}
