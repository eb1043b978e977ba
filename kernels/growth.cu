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
// ChildrenInfo with stride part_stride, histogram tiles of tile_rows rows). category_words:
// the words of a category set (0: the tree has no categorical features); the tree then has
// that many rows of set words after its count row (layouts.py TREE_FIELDS); category_sets:
// the level's sets by candidate (split.cu / categorical.cu's node_sets), or, growing lossguide,
// by node id.
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
  // Node nid's category set (n_words words) into its column of the set rows.
  __device__ __forceinline__ void set_categories(long long nid, const uint32_t* set, int n_words) const {
    for (int w = 0; w < n_words; ++w) a[(long long)(kCategoryRow + w) * cap + nid] = (int)set[w];
  }
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

// TreeBuilder.split of node nid by r, then add_children's two leaves lid and lid + 1 (the
// depthwise level and a lossguide expansion write a split alike).
__device__ __forceinline__ void write_split(const TreeView& t, long long nid, long long lid, const SplitRecord& r,
                                            int depth, const SplitParams& p) {
  const long long rid = lid + 1;
  t.at(kFeature, nid) = r.feature;
  t.at(kBin, nid) = r.bin;
  t.set_float(kThreshold, nid, r.threshold);
  t.at(kDefaultLeft, nid) = r.default_left != 0;
  t.set_float(kGain, nid, r.gain);
  t.at(kLeft, nid) = (int)lid;
  t.at(kRight, nid) = (int)rid;
  t.set_float(kValue, nid, 0.0f);
  write_leaf(t, lid, nid, depth + 1, calc_weight(r.left_grad, r.left_hess, p), p.eta, r.left_hess);
  write_leaf(t, rid, nid, depth + 1, calc_weight(r.right_grad, r.right_hess, p), p.eta, r.right_hess);
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
  const float min_split_loss = p.min_split_loss;
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
      write_split(t, nid, lid, r, depth, p);
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
      // A categorical split's rows go by its set: the partition reads the level's row i.
      part_info[part_at.category_row + rank] = r.categorical ? i : -1;
      if (r.categorical) t.set_categories(nid, b.category_sets + i * b.category_words, b.category_words);
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

// ---------------------------------------------------------------------------- lossguide
// A lossguide tree grown one expansion at a time with no host work between the expansions
// (growth/device_lossguide.py; growth/host.py with driver.Driver's lossguide queue is the
// reference, and the trees are the same to the bit). The host queues max_leaves - 1
// expansions, each the same launches: expand_best picks the queued leaf with the largest
// loss change and writes its split, its children and the launches' inputs; the partition
// moves its rows; the histogram of the child with the smaller hessian sum is built, summed
// across workers, and children_histograms makes both children from the parent's; store_children
// keeps them; split.cu scores them. Once the tree is done every launch finds nothing to do.
//
// Every open leaf keeps its histogram in a slot of `slots` ((max_leaves, total_bins, 2) int64):
// the root's is slot 0; an expansion's left child takes its parent's slot, its right child
// the next free one, so a tree needs at most max_leaves slots. slot_left / slot_right hold,
// by slot, the sums of the children of that leaf's best split (split.cu's left / right).
// recs: (cap,) SplitRecord, each scored leaf's best split by node id; queued: (cap,) int32,
// whether a leaf waits in the queue (driver.Driver.push: its loss change exceeds RT_EPS).
// lg: LossguideState.

// The lossguide state of a tree whose root was just scored. Launch: one thread.
__global__ void start_lossguide(long long* __restrict__ lg, int32_t* __restrict__ slot_of) {
  lg[kLgLeaves] = 1;
  lg[kLgDone] = 0;
  lg[kLgEvaluatedFirst] = 0;
  lg[kLgEvaluatedCount] = 1;
  lg[kLgSlots] = 1;
  slot_of[0] = 0;
}

// Does (gain, nid) come out of driver.Driver's queue before (best_gain, best_nid)? The larger
// loss change first, then the smaller (older) node id; best_nid < 0 is no candidate yet.
__device__ __forceinline__ bool pops_first(float gain, int nid, float best_gain, int best_nid) {
  if (nid < 0) return false;
  if (best_nid < 0) return true;
  return gain > best_gain || (gain == best_gain && nid < best_nid);
}

// One expansion: the last evaluation's records filed under their nodes (scored: its
// records, scored_left / scored_right: their children's sums, scored_sets: their category
// sets (category_words each; b.category_sets keeps them by node id), for lg's evaluated nodes);
// the queued leaf that pops first, if the tree may still split it (driver.Driver.pop:
// leaves below max_leaves, splits_applied, depth below max_depth; otherwise the tree is
// done), split as expand_level splits a node; its children scored next when
// driver.Driver.child_valid. Writes b.part_info (stride 1), b.child_info (parent_row: the
// parent's slot) and b.hist_tiles (the built child, staged in slot 0 of the caller's
// buffer), state[kCandidates] (the children to score: 0 or 2) and lg.
// Launch: one block (of up to 1024 threads).
__global__ void __launch_bounds__(1024) expand_best(const SplitRecord* __restrict__ scored,
                                                    const long long* __restrict__ scored_left,
                                                    const long long* __restrict__ scored_right,
                                                    const uint32_t* __restrict__ scored_sets,
                                                    SplitRecord* __restrict__ recs, int32_t* __restrict__ queued,
                                                    long long* __restrict__ slot_left,
                                                    long long* __restrict__ slot_right,
                                                    int32_t* __restrict__ slot_of, long long* __restrict__ lg,
                                                    int max_depth, int max_leaves, const SplitParams p,
                                                    const TreeBuffers b) {
  __shared__ float warp_gain[32];
  __shared__ int warp_nid[32];
  __shared__ long long decided[4];  // the node split (-1: none), partition tiles, histogram tiles, the built child
  long long* __restrict__ state = b.state;
  long long* __restrict__ segs = b.segs;
  long long* __restrict__ part_info = b.part_info;
  long long* __restrict__ child_info = b.child_info;
  long long* __restrict__ hist_tiles = b.hist_tiles;
  const TreeView t{b.tree, b.cap};
  const PartitionInfo part_at(1);
  const ChildrenInfo child_at(1);
  const long long n_nodes = state[kNodes];
  const bool was_done = lg[kLgDone] != 0;

  // The last evaluation's nodes join the queue (driver.Driver.push).
  const long long first = lg[kLgEvaluatedFirst], n_scored = lg[kLgEvaluatedCount];
  if ((long long)threadIdx.x < n_scored) {
    const int i = threadIdx.x;
    const long long nid = first + i;
    const SplitRecord r = scored[i];
    recs[nid] = r;
    const int s = slot_of[nid];
    slot_left[2 * s] = scored_left[2 * i];
    slot_left[2 * s + 1] = scored_left[2 * i + 1];
    slot_right[2 * s] = scored_right[2 * i];
    slot_right[2 * s + 1] = scored_right[2 * i + 1];
    queued[nid] = (double)r.gain > kRtEps ? 1 : 0;
    // Its categories, kept by node id until it is split (b.category_sets is written here only).
    uint32_t* kept = b.category_sets + nid * b.category_words;
    for (int w = 0; w < b.category_words; ++w) kept[w] = scored_sets[(long long)i * b.category_words + w];
  }
  __syncthreads();

  // The queued node that pops first.
  float best_gain = 0.0f;
  int best_nid = -1;
  if (!was_done) {
    for (long long nid = threadIdx.x; nid < n_nodes; nid += blockDim.x) {
      if (queued[nid] && pops_first(recs[nid].gain, (int)nid, best_gain, best_nid)) {
        best_gain = recs[nid].gain;
        best_nid = (int)nid;
      }
    }
  }
  for (int o = 16; o > 0; o >>= 1) {
    const float g = __shfl_down_sync(0xffffffffu, best_gain, o);
    const int n = __shfl_down_sync(0xffffffffu, best_nid, o);
    if (pops_first(g, n, best_gain, best_nid)) {
      best_gain = g;
      best_nid = n;
    }
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = (blockDim.x + 31) >> 5;
  if (lane == 0) {
    warp_gain[warp] = best_gain;
    warp_nid[warp] = best_nid;
  }
  __syncthreads();

  if (threadIdx.x == 0) {
    for (int w = 1; w < n_warps; ++w) {
      if (pops_first(warp_gain[w], warp_nid[w], best_gain, best_nid)) {
        best_gain = warp_gain[w];
        best_nid = warp_nid[w];
      }
    }
    long long nid = -1;
    const long long leaves = lg[kLgLeaves];
    if (!was_done && best_nid >= 0 && !(max_leaves > 0 && leaves >= max_leaves)) {
      const SplitRecord r = recs[best_nid];
      const int depth = t.at(kDepth, best_nid);
      // split/rules.py splits_applied; the gain compares as a double, as the host's numpy does.
      const bool valid = r.feature >= 0 && (double)r.gain > kRtEps && r.left_hess != 0.0 && r.right_hess != 0.0 &&
                         r.gain >= p.min_split_loss && !(max_depth > 0 && depth >= max_depth);
      if (valid) nid = best_nid;
    }
    decided[0] = nid;
    decided[1] = decided[2] = 0;
    decided[3] = -1;
    if (nid < 0) {  // driver.Driver.pop: an empty queue, or an invalid top, ends the tree
      lg[kLgDone] = 1;
      lg[kLgEvaluatedCount] = 0;
      part_info[part_at.k] = 0;
      part_info[part_at.n_tiles] = 0;
      child_info[child_at.k] = 0;
      state[kCandidates] = 0;
      for (int c = 0; c < kTileColumns; ++c) hist_tiles[c] = 0;
    } else {
      const SplitRecord r = recs[nid];
      const int depth = t.at(kDepth, nid);
      lg[kLgLeaves] = leaves + 1;
      queued[nid] = 0;
      const long long lid = n_nodes, rid = n_nodes + 1;
      write_split(t, nid, lid, r, depth, p);
      state[kNodes] = n_nodes + 2;
      t.set_count(n_nodes + 2);
      // The partition's one split; both children start empty at the node's start.
      const long long s0 = segs[2 * nid], c0 = segs[2 * nid + 1];
      part_info[part_at.start] = s0;
      part_info[part_at.count] = c0;
      part_info[part_at.feature] = r.feature;
      part_info[part_at.bin] = r.bin;
      part_info[part_at.default_left] = r.default_left;
      part_info[part_at.left_id] = lid;
      part_info[part_at.right_id] = rid;
      part_info[part_at.row_offset] = 0;
      part_info[part_at.category_row] = r.categorical ? nid : -1;  // b.category_sets by node id
      if (r.categorical) t.set_categories(nid, b.category_sets + nid * b.category_words, b.category_words);
      segs[2 * lid] = s0;
      segs[2 * lid + 1] = 0;
      segs[2 * rid] = s0;
      segs[2 * rid + 1] = 0;
      const long long n_part_tiles = (c0 + kPartitionTileRows - 1) / kPartitionTileRows;
      part_info[part_at.first_tile] = 0;
      part_info[part_at.first_tile + 1] = n_part_tiles;
      part_info[part_at.k] = 1;
      part_info[part_at.n_tiles] = n_part_tiles;
      decided[1] = n_part_tiles;
      // driver.Driver.child_valid, with the leaf just counted.
      const bool grow = !(max_depth > 0 && depth + 1 >= max_depth) && !(max_leaves > 0 && leaves + 1 >= max_leaves);
      if (grow) {
        // The child with the smaller hessian sum is built, its sibling subtracted.
        const bool right = r.right_hess < r.left_hess;
        child_info[child_at.k] = 1;
        child_info[child_at.parent_row] = slot_of[nid];
        child_info[child_at.build_right] = right;
        slot_of[lid] = slot_of[nid];
        slot_of[rid] = (int)lg[kLgSlots];
        lg[kLgSlots] += 1;
        lg[kLgEvaluatedFirst] = lid;
        lg[kLgEvaluatedCount] = 2;
        state[kCandidates] = 2;
        decided[2] = (c0 + b.tile_rows - 1) / b.tile_rows;  // counted from the parent's rows: an upper bound
        decided[3] = right ? rid : lid;
      } else {
        child_info[child_at.k] = 0;
        lg[kLgEvaluatedCount] = 0;
        state[kCandidates] = 0;
      }
      hist_tiles[0] = decided[2];  // the header row: (n_tiles, 0, ...)
      for (int c = 1; c < kTileColumns; ++c) hist_tiles[c] = 0;
    }
  }
  __syncthreads();
  if (decided[0] < 0) return;
  long long* tile_split = part_info + part_at.tile_split;
  for (long long j = threadIdx.x; j < decided[1]; j += blockDim.x) tile_split[j] = 0;
  for (long long j = threadIdx.x; j < decided[2]; j += blockDim.x) {
    long long* row = hist_tiles + kTileColumns * (j + 1);
    row[kTileSlot] = 0;
    row[kTileNode] = decided[3];
    row[kTileIndex] = j;
    row[kTileRowOffset] = 0;
  }
}

// The children children_histograms made ((2, row_len): left, right) kept in their slots, for
// when they are expanded; nothing when the last expansion scores no children.
// Launch: 1-D, any shape (grid-stride over 2 * row_len).
__global__ void store_children(const long long* __restrict__ children, long long* __restrict__ slots,
                               const int32_t* __restrict__ slot_of, const long long* __restrict__ lg,
                               long long row_len) {
  if (lg[kLgEvaluatedCount] != 2) return;
  const long long lid = lg[kLgEvaluatedFirst];
  const long long s0 = slot_of[lid], s1 = slot_of[lid + 1];
  const long long step = (long long)gridDim.x * blockDim.x;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < 2 * row_len; i += step) {
    const long long child = i / row_len, e = i - child * row_len;
    slots[(child ? s1 : s0) * row_len + e] = children[i];
  }
}
